"""The machinery the three environments share: a workload pool, the
steppable engine, one decision point built job after job on a ``Board``,
the reward, and the observation.

At each decision point the active jobs (arrival order, at most
``max_jobs``; the others wait) are decided one by one. A job's
*allocation* (workers, PSs, architecture, mode) comes from the agent
(``agent_allocates``: one action over the candidate slots) or from a
heuristic allocation policy; its *placement* comes from the agent
(``agent_places``: one action per worker, then per PS) or from a heuristic
placement policy. When every job is decided the engine applies the
``Decision`` and advances to the next decision point.

Reward: ``-(job-seconds in the system during the engine step) / (3600 *
reward_jobs)``, i.e. minus the number of active jobs times the elapsed
simulated time, in hours per ``reward_jobs`` jobs; it is given on the action
that completes a decision point (0 on the sub-steps before it), so that its
sum over an episode in which every job finishes is ``-total JCT / (3600 *
reward_jobs)``. Episodes terminate when the workload is done and are
truncated at ``max_time_s`` simulated seconds or ``max_decisions`` decision
points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hrlsched.contract import ARCHS, MODES, ClusterView, Decision, effective_job
from hrlsched.core.catalogue import get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs import features as F
from hrlsched.envs.board import Board, link_layout
from hrlsched.envs.candidates import KEEP, WAIT, make_table
from hrlsched.envs.masks import HeuristicFeasibility, PartialPlacement
from hrlsched.envs.pool import WorkloadPool
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.registry import ALLOCATIONS, PLACEMENTS
from hrlsched.sim.simulation import Simulation, StepResult

ALLOCATE, PLACE = 0, 1


class InvalidActionError(ValueError):
    """An action the mask does not allow."""


class MaskedDiscrete(spaces.Discrete):
    """``Discrete`` whose ``sample()`` with no mask draws among the actions
    the environment currently allows (``valid``, kept up to date by the
    environment), so that generic tools that sample the action space
    (``check_env``, random baselines) send valid actions."""

    def __init__(self, n: int, seed: int | None = None) -> None:
        super().__init__(n, seed=seed)
        self.valid = np.ones(n, dtype=np.int8)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        if mask is None and probability is None:
            mask = self.valid
        return super().sample(mask=mask, probability=probability)


class SchedulingEnv(gym.Env):
    """Base of ``AllocationEnv``, ``PlacementEnv`` and ``HierarchicalEnv``
    (see those for the action spaces). Constructor arguments:

    - ``scenario``, ``seeds``, ``overrides`` (``--set``-like ``key=value``), or
      a ready ``pool`` (``WorkloadPool``): the workloads drawn at each reset.
    - ``placement``: the heuristic placement (by name, ``policies.registry``)
      that places the agent's allocations and masks allocation candidates;
      ``allocation``: the heuristic allocation of ``Placement-v0``.
    - ``max_jobs``, ``max_gpus``, ``max_sockets``, ``max_links``: padding of
      the observation (default: the scenario's).
    - ``worker_options``, ``ps_options``: the candidate menu (``candidates``).
    - ``decision_points``/``decision_every``: when the agent is asked, unless
      the scenario's ``sim.decision_points`` says (default ``"events"``:
      at arrivals and completions).
    - ``max_time_s``/``max_decisions``: truncation; ``reward_jobs``: reward scale.
    - With decision points at events, a decision that runs no job at all
      would stall the clock until the time limit; the first job the heuristic
      placement can place then starts (counted in ``info["idle_rescues"]``).
    - ``skip_forced``: a job whose only valid choice is to wait is passed
      over without asking the agent.
    - ``invalid_action``: ``"raise"`` (an action the mask forbids raises
      ``InvalidActionError`` naming the action and why) or ``"fallback"``
      (it is counted in ``info["invalid_actions"]`` and the job waits, or is
      deferred in a placement phase). ``gymnasium``'s ``check_env`` needs
      ``"fallback"``: its determinism check samples an action before it
      resets the environment, so the action may be masked at that state.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    agent_allocates = True
    agent_places = False

    def __init__(
        self,
        scenario: str = "default",
        seeds: Sequence[int] = (0,),
        overrides: Sequence[str] = (),
        pool: WorkloadPool | None = None,
        placement: str = "pack",
        allocation: str = "fifo",
        max_jobs: int | None = None,
        max_gpus: int | None = None,
        max_sockets: int | None = None,
        max_links: int | None = None,
        worker_options: Sequence[int] = (1, 2, 4, 8, 16, 32),
        ps_options: Sequence[str] = ("one", "half"),
        max_tasks_per_gpu: int = 1,
        decision_points: str = "events",
        decision_every: int = 1,
        max_time_s: float | None = None,
        max_decisions: int | None = None,
        reward_jobs: float = 10.0,
        skip_forced: bool = True,
        invalid_action: str = "raise",
    ) -> None:
        if invalid_action not in ("raise", "fallback"):
            raise ValueError(f"invalid_action: expected 'raise' or 'fallback', got {invalid_action!r}")
        self.invalid_action = invalid_action
        self.invalid_actions = 0
        self.pool = pool if pool is not None else WorkloadPool(scenario, seeds, overrides)
        topo = self.pool.built(self.pool.seeds[0]).topology
        self.topo = topo
        if placement not in PLACEMENTS:
            raise ValueError(f"placement: unknown placement {placement!r}; expected one of {sorted(PLACEMENTS)}")
        pol = PLACEMENTS[placement].factory()
        if not isinstance(pol, IncrementalPlacement):
            raise ValueError(f"placement {placement!r}: expected a job-by-job placement policy")
        pol.max_tasks_per_gpu = int(max_tasks_per_gpu)
        self.placement_policy = pol
        self.allocation_name = allocation
        if not self.agent_allocates and allocation not in ALLOCATIONS:
            raise ValueError(f"allocation: unknown policy {allocation!r}; expected one of {sorted(ALLOCATIONS)}")
        self.max_tasks = int(max_tasks_per_gpu)
        if self.max_tasks < 1:
            raise ValueError(f"max_tasks_per_gpu: expected >= 1, got {max_tasks_per_gpu}")
        self.link_off, self.link_kind, self.link_cap = link_layout(topo)
        n_links = int(self.link_off[-1])
        self.max_jobs = int(max_jobs if max_jobs is not None else self.pool.max_jobs())
        self.max_gpus = int(max_gpus if max_gpus is not None else topo.n_gpus)
        self.max_sockets = int(max_sockets if max_sockets is not None else topo.n_sockets)
        self.max_links = int(max_links if max_links is not None else n_links)
        for name, have, cap in (("max_gpus", topo.n_gpus, self.max_gpus), ("max_sockets", topo.n_sockets,
                                self.max_sockets), ("max_links", n_links, self.max_links)):
            if have > cap:
                raise ValueError(f"{name}: the scenario's cluster has {have}, more than {name}={cap}")
        if self.max_jobs < 1:
            raise ValueError(f"max_jobs: expected >= 1, got {self.max_jobs}")
        self.table = make_table(worker_options, ps_options, topo.n_gpus)
        self.n_cand = self.table.size if self.agent_allocates else 0
        self.place_off = self.n_cand
        self.defer_action = self.place_off + self.max_gpus + self.max_sockets
        n_actions = self.n_cand + (self.max_gpus + self.max_sockets + 1 if self.agent_places else 0)
        self.action_space = MaskedDiscrete(n_actions)
        self.observation_space = F.observation_space(
            self.max_jobs, self.max_gpus, self.max_links, n_actions, self.n_cand if self.agent_allocates else None,
            self.max_sockets,
        )
        self._gpu_groups = F.gpu_groups(topo, self.max_gpus)
        self.decision_points, self.decision_every = decision_points, int(decision_every)
        self.max_time_s = max_time_s
        self.max_decisions = max_decisions
        if reward_jobs <= 0:
            raise ValueError(f"reward_jobs: expected > 0, got {reward_jobs}")
        self.reward_scale = 1.0 / (3600.0 * float(reward_jobs))
        self.skip_forced = bool(skip_forced)
        self._sims: dict[int, Simulation] = {}
        self._links_static = F.static_links(self.link_kind, self.link_cap, self.max_links)
        self._sim: Simulation | None = None
        self._view: ClusterView | None = None

    # ------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        wseed = self.pool.draw(self.np_random)
        sim = self._sims.get(wseed)
        if sim is None:
            sim = self.pool.simulation(wseed, self.max_tasks, self.decision_points, self.decision_every)
            if self.max_time_s is not None:
                import dataclasses

                sim.cfg = dataclasses.replace(sim.cfg, max_time_s=float(self.max_time_s))
            self._sims[wseed] = sim
        self._sim = sim
        self.workload_seed = wseed
        b = self.pool.built(wseed)
        self.profiles = {j.model: get_profile(j.model, sim.catalogue) for j in sim.jobs}
        self.base_jobs = {j.job_id: j for j in sim.jobs}
        self._speed_cache: dict[tuple, float] = {}
        self.placement_policy.reset(b.topology, np.random.default_rng(self.np_random.integers(2**63)))
        self.alloc_policy: AllocationPolicy | None = None
        if not self.agent_allocates:
            self.alloc_policy = ALLOCATIONS[self.allocation_name].factory()  # type: ignore[assignment]
            self.alloc_policy.reset(b.topology, np.random.default_rng(self.np_random.integers(2**63)))
        self.decisions = 0
        self.invalid_actions = 0
        self.rescues = 0
        self.episode_job_s = 0.0
        self._done = False
        view = sim.reset(int(self.np_random.integers(2**31)))
        if view is None:
            raise ValueError(f"scenario {self.pool.name!r} seed {wseed}: the workload has no decision point")
        reward = self._start_point(view)
        self._pending_reward = reward
        obs = self._obs()
        return obs, self._info()

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self._done or self._sim is None:
            raise RuntimeError("step() called on a finished episode; call reset()")
        a = int(action)
        if not (0 <= a < self.action_space.n) or not self._mask[a]:
            if self.invalid_action == "raise":
                raise InvalidActionError(f"action {a}: {self._why_invalid(a)}")
            # "fallback": the job waits (allocation) or is deferred (placement).
            self.invalid_actions += 1
            a = WAIT if self.phase == ALLOCATE else self.defer_action
        if self.phase == ALLOCATE:
            self._choose_candidate(a)
        else:
            self._place_task(a)
        reward = self._pending_reward
        self._pending_reward = 0.0
        reward += self._advance()
        terminated = truncated = False
        if self._done:
            terminated = self._terminated
            truncated = not terminated
        return self._obs(), float(reward), terminated, truncated, self._info()

    @property
    def _mask(self) -> np.ndarray:
        return self.__mask

    @_mask.setter
    def _mask(self, m: np.ndarray) -> None:
        self.__mask = m
        self.action_space.valid = m  # type: ignore[attr-defined]

    def action_masks(self) -> np.ndarray:
        """Valid actions (sb3-contrib MaskablePPO convention)."""
        return self._mask.astype(bool)

    # ----------------------------------------------------- decision points
    def _start_point(self, view: ClusterView) -> float:
        """Set up a decision point; advance the engine over points with no
        choice for the agent. Returns the reward of those engine steps."""
        reward = 0.0
        while True:
            self._view = view
            self._begin(view)
            if self._next_choice():
                return reward
            r, view = self._engine_step()
            reward += r
            if view is None:
                return reward

    def _begin(self, view: ClusterView) -> None:
        sim = self._sim
        assert sim is not None
        self.board = Board(view, self.max_tasks, self.profiles, self.link_off)
        self.feas = HeuristicFeasibility(self.placement_policy)
        n = min(len(view.jobs), self.max_jobs)
        self.n_dec = n
        self.k = -1  # job being decided
        self.phase = ALLOCATE
        self.part: PartialPlacement | None = None
        self.placements: dict[int, Placement] = {}
        self.arch: dict[int, str] = {}
        self.mode: dict[int, str] = {}
        self.chosen = np.zeros(self.max_jobs)
        self.decided = np.zeros(self.max_jobs)
        self._jobs_m = self._job_matrix(view, n)
        util = F.link_utilisation(sim.perf, view, int(self.link_off[-1]))
        self._links_m = self._links_static.copy()
        if util is not None:
            self._links_m[: util.size, 2 + len(F.LINK_KINDS)] = util
        self._gpus_m = np.zeros((self.max_gpus, len(F.GPU_FEATURES)), dtype=np.float32)
        self._socks_m = np.zeros((self.max_sockets, len(F.SOCKET_FEATURES)), dtype=np.float32)
        self._gpus_dirty = True
        # Level-2 only: the heuristic allocations, in priority order; kept jobs committed first.
        self.queue: list[tuple[int, Allocation]] = []
        if not self.agent_allocates:
            assert self.alloc_policy is not None
            allocs = self.alloc_policy.allocate(view)
            for jid, al in allocs.items():
                k = view.index(jid)
                if k >= n or al.workers < 1:
                    continue
                job = self._effective(k, al.arch, al.mode)
                pl = view.placements[k]
                nps = max(al.ps, 1) if job.arch == "ps" else 0
                if pl is not None and job is view.jobs[k] and pl.n_workers == al.workers and pl.n_ps == nps \
                        and self.board.occ.fits(job, pl):
                    self._commit(k, job, pl)
                else:
                    self.queue.append((k, Allocation(al.workers, nps, None, job.arch, job.mode)))

    def _effective(self, k: int, arch: str | None, mode: str | None) -> Job:
        cur = self._view.jobs[k]  # type: ignore[union-attr]
        base = self.base_jobs[cur.job_id]
        a = arch if arch is not None and base.arch_open else cur.arch
        m = mode if mode is not None and base.mode_open else cur.mode
        return effective_job(base, a, m) if (a, m) != (cur.arch, cur.mode) else cur

    def _next_choice(self) -> bool:
        """Move to the next job that needs the agent; False when the point is done."""
        view = self._view
        assert view is not None
        if self.agent_allocates:
            while True:
                self.k += 1
                if self.k >= self.n_dec:
                    return False
                self.phase = ALLOCATE
                self._cand_mask()
                if not self.skip_forced or self._mask[1:].any():
                    self._set_current()
                    return True
                self.decided[self.k] = 1.0
        while self.queue:
            k, al = self.queue.pop(0)
            self.k = k
            job = self._effective(k, al.arch, al.mode)
            if self.feas.place(view, self.board, job, al.workers, al.ps) is None:
                continue  # cannot be placed now: it waits
            self._begin_place(job, al.workers, al.ps)
            self._set_current()
            return True
        return False

    def _set_current(self) -> None:
        self._gpus_dirty = True

    def _engine_step(self) -> tuple[float, ClusterView | None]:
        sim = self._sim
        assert sim is not None
        if not self.placements and sim.points == "events":
            self._rescue_idle()
        d = Decision(placements=dict(self.placements), arch=self.arch, mode=self.mode)
        out: StepResult = sim.step(d)
        self.decisions += 1
        self.episode_job_s += out.job_seconds
        r = -out.job_seconds * self.reward_scale
        if out.done:
            self._done = True
            st = sim.state
            self._terminated = bool(st.next_arrival >= len(sim.jobs) and not st.active)
            return r, None
        if self.max_decisions is not None and self.decisions >= self.max_decisions:
            self._done = True
            self._terminated = False
            return r, None
        return r, out.view

    def _rescue_idle(self) -> None:
        """An empty decision with decision points at events would leave the
        cluster idle until the time limit (no arrival or completion would
        come to ask again), so the first job (arrival order) that the heuristic
        placement can place at its request, or else with one worker, starts."""
        view = self._view
        assert view is not None
        self.rescues += 1
        for k, job in enumerate(view.jobs):
            for w in (job.requested_gpus, 1):
                pl = self.feas.place(view, self.board, job, w, job.num_ps_requested)
                if pl is not None:
                    self._commit(k, job, pl)
                    return

    def _advance(self) -> float:
        """After an action: the next choice, completing decision points as needed."""
        if self.phase == PLACE and self.part is not None:
            return 0.0
        if self._next_choice():
            return 0.0
        r, view = self._engine_step()
        if view is None:
            return r
        return r + self._start_point(view)

    # -------------------------------------------------------- allocation
    def _cand_mask(self) -> None:
        """Mask and features of the candidates of job ``k``."""
        view, k, t = self._view, self.k, self.table
        assert view is not None
        cur = view.jobs[k]
        base = self.base_jobs[cur.job_id]
        K = t.size
        valid = np.zeros(K, dtype=bool)
        valid[WAIT] = True
        pls: list[Placement | None] = [None] * K
        cur_pl = view.placements[k]
        if cur_pl is not None and self.board.occ.fits(cur, cur_pl):
            valid[KEEP] = True
            pls[KEEP] = cur_pl
        slots = np.flatnonzero(
            (t.workers > 0) & ~t.duplicate
            & ((t.arch == ARCHS.index(cur.arch)) | base.arch_open)
            & ((t.mode == MODES.index(cur.mode)) | base.mode_open)
        )
        room = self.feas.worker_room(self.board, cur)  # workers use the same resources in every variant
        slots = slots[t.workers[slots] <= room]
        jobs: dict[tuple[int, int], Job] = {}
        for c in slots.tolist():
            key = (int(t.arch[c]), int(t.mode[c]))
            job = jobs.get(key)
            if job is None:
                job = jobs[key] = self._effective(k, ARCHS[key[0]], MODES[key[1]])
            pl = self.feas.place(view, self.board, job, int(t.workers[c]), int(t.ps[c]))
            if pl is not None:
                valid[c] = True
                pls[c] = pl
        self._cand_pls = pls
        self._cand_jobs = jobs
        m = np.zeros(self.action_space.n, dtype=np.int8)
        m[:K] = valid
        self._mask = m

    def _choose_candidate(self, c: int) -> None:
        view, k, t = self._view, self.k, self.table
        assert view is not None
        self.decided[k] = 1.0
        if c == WAIT:
            return
        if c == KEEP:
            job, pl = view.jobs[k], self._cand_pls[KEEP]
            assert pl is not None
            self.chosen[k] = pl.n_workers
            self._commit(k, job, pl)
            return
        job = self._cand_jobs[(int(t.arch[c]), int(t.mode[c]))]
        w, p = int(t.workers[c]), int(t.ps[c])
        self.chosen[k] = w
        if self.agent_places:
            self._begin_place(job, w, p)
            return
        pl = self._cand_pls[c]
        assert pl is not None
        cur_pl = view.placements[k]
        if cur_pl is not None and job is view.jobs[k] and cur_pl.n_workers == w and cur_pl.n_ps == p \
                and self.board.occ.fits(job, cur_pl):
            pl = cur_pl  # the same allocation: stay in place, no restart
        self._commit(k, job, pl)

    def _commit(self, k: int, job: Job, pl: Placement) -> None:
        view = self._view
        assert view is not None
        jid = job.job_id
        self.board.commit(job, pl)
        self.placements[jid] = pl
        base = self.base_jobs[jid]
        if base.arch_open:
            self.arch[jid] = job.arch
        if base.mode_open:
            self.mode[jid] = job.mode
        self._links_m[: self.link_off[-1], -1] = self.board.link_jobs / 4.0
        self._gpus_dirty = True

    # --------------------------------------------------------- placement
    def _begin_place(self, job: Job, w: int, p: int) -> None:
        self.phase = PLACE
        self.part = PartialPlacement(self.board, job, w, p)
        self._place_mask()

    def _place_mask(self) -> None:
        part = self.part
        assert part is not None
        m = np.zeros(self.action_space.n, dtype=np.int8)
        G, S = self.topo.n_gpus, self.topo.n_sockets
        o = self.place_off
        if part.placing_worker:
            m[o:o + G] = part.gpu_mask()
        else:
            m[o + self.max_gpus:o + self.max_gpus + S] = part.socket_mask()
        if not m.any():
            m[self.defer_action] = 1  # a dead end: the job waits
        self._mask = m

    def _place_task(self, a: int) -> None:
        part = self.part
        assert part is not None
        self._gpus_dirty = True
        if a == self.defer_action:
            self.part = None
            self.chosen[self.k] = 0.0
            self.decided[self.k] = 1.0
            return
        o = self.place_off
        if part.placing_worker:
            part.place_worker(a - o)
        else:
            part.place_ps(a - o - self.max_gpus)
        if part.complete:
            self.part = None
            self._commit(self.k, part.job, part.placement())
            self.chosen[self.k] = part.n_workers
            self.decided[self.k] = 1.0
            return
        self._place_mask()

    def _why_invalid(self, a: int) -> str:
        if not 0 <= a < self.action_space.n:
            return f"out of range 0..{self.action_space.n - 1}"
        if a < self.n_cand:
            if self.phase != ALLOCATE:
                return "an allocation candidate while a task is being placed"
            t = self.table
            what = {WAIT: "wait", KEEP: "keep the current allocation"}.get(
                a, f"{t.workers[a]} workers, {t.ps[a]} PS, {ARCHS[t.arch[a]]}, {MODES[t.mode[a]]}")
            return f"candidate {what} is masked for job {self._view.jobs[self.k].job_id}: " \
                   "the job does not leave this choice open, it repeats another slot, or the " \
                   f"{self.placement_policy.name} placement cannot place it on what is left"  # type: ignore[union-attr]
        if self.phase == ALLOCATE:
            return "a placement target while an allocation is being chosen"
        if a == self.defer_action:
            return "defer is only valid when no GPU or socket can take the task"
        g = a - self.place_off
        if self.part is not None and self.part.placing_worker:
            return f"GPU {g} cannot take a worker of this job (no free slot, already holds one of its " \
                   "workers, its server lacks CPU cores or memory, or a socket given for a worker)"
        return f"socket index {g - self.max_gpus} cannot take a PS (its server lacks CPU cores or memory, " \
               "or a GPU given for a PS)"

    # ------------------------------------------------------- observation
    def _speed(self, job: Job, w: int, p: int, bs: int) -> float:
        key = (job.job_id, job.arch, job.mode, bs, w, p)
        v = self._speed_cache.get(key)
        if v is None:
            v = 0.0 if w < 1 else float(self._view.perf.isolated_speed(job, w, p, bs))  # type: ignore[union-attr]
            self._speed_cache[key] = v
        return v

    def _job_matrix(self, view: ClusterView, n: int) -> np.ndarray:
        out = np.zeros((self.max_jobs, len(F.JOB_FEATURES)), dtype=np.float32)
        if n == 0:
            return out
        jobs = view.jobs[:n]
        bs = view.batch_sizes[:n]
        cw = np.array([0 if p is None else p.n_workers for p in view.placements[:n]], dtype=float)
        cp = np.array([0 if p is None else p.n_ps for p in view.placements[:n]], dtype=float)
        req = np.array([self._speed(j, j.requested_gpus, j.num_ps_requested, int(b)) for j, b in zip(jobs, bs)])
        w0 = cw.astype(int)
        ps1 = [max(int(p), 1) if j.arch == "ps" else 0 for j, p in zip(jobs, cp)]
        more = np.array([self._speed(j, int(w) + 1, p, int(b)) if w + 1 <= self.topo.n_gpus else 0.0
                         for j, w, p, b in zip(jobs, w0, ps1, bs)])
        now = np.array([self._speed(j, int(w), p, int(b)) for j, w, p, b in zip(jobs, w0, ps1, bs)])
        req = np.maximum(req, 1e-12)
        profs = [self.profiles[j.model] for j in jobs]
        base = [self.base_jobs[j.job_id] for j in jobs]
        prog, rem = view.progress[:n], view.remaining[:n]
        o = out[:n]
        o[:, 0] = 1.0
        o[:, 4] = cw > 0
        o[:, 5] = cw / F.WORKER_SCALE
        o[:, 6] = cp / F.WORKER_SCALE
        o[:, 7] = np.log1p(view.age_s()[:n] / F.HOUR)
        o[:, 8] = prog / np.maximum(prog + rem, 1e-12)
        o[:, 9] = np.log1p(rem / req / F.HOUR)
        o[:, 10] = view.speed[:n] / req
        o[:, 11] = (more - now) / req
        o[:, 12] = [p.params_mb / 1000.0 for p in profs]
        o[:, 13] = [p.sample_time_s * 1000.0 for p in profs]
        o[:, 14] = [j.requested_gpus / F.WORKER_SCALE for j in jobs]
        o[:, 15] = [j.arch == "ps" for j in jobs]
        o[:, 16] = [j.mode == "async" for j in jobs]
        o[:, 17] = [b.arch_open for b in base]
        o[:, 18] = [b.mode_open for b in base]
        o[:, 19] = np.log1p(view.restarts[:n])
        o[:, 20] = np.log1p(view.attained_gpu_s[:n] / F.HOUR)
        self._req_speed = req
        return np.clip(out, -F.BIG, F.BIG)

    def _candidate_matrix(self) -> np.ndarray:
        t, view, k = self.table, self._view, self.k
        assert view is not None
        out = np.zeros((t.size, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
        if self.phase != ALLOCATE or k >= self.n_dec:
            return out
        valid = self._mask[: t.size].astype(bool)
        cur = view.jobs[k]
        bs = int(view.batch_sizes[k])
        cur_pl = view.placements[k]
        req = float(self._req_speed[k])
        rem = float(view.remaining[k])
        w = t.workers.astype(float).copy()
        p = t.ps.astype(float).copy()
        a = (t.arch == 0).astype(float)
        m = (t.mode == 1).astype(float)
        if cur_pl is not None:
            w[KEEP], p[KEEP] = cur_pl.n_workers, cur_pl.n_ps
            a[KEEP], m[KEEP] = cur.arch == "ps", cur.mode == "async"
        sp = np.zeros(t.size)
        servers = np.zeros(t.size)
        for c in np.flatnonzero(valid).tolist():
            if c == WAIT:
                continue
            if c == KEEP:
                sp[c] = float(view.speed[k]) if view.speed[k] > 0 else self._speed(cur, int(w[c]), int(p[c]), bs)
            else:
                job = self._cand_jobs[(int(t.arch[c]), int(t.mode[c]))]
                sp[c] = self._speed(job, int(w[c]), int(p[c]), bs)
            pl = self._cand_pls[c]
            if pl is not None:
                servers[c] = np.unique(self.topo.gpu_server[list(pl.gpus)]).size
        out[:, 0] = valid
        out[WAIT, 1] = 1.0
        out[KEEP, 2] = 1.0
        out[:, 3] = w / F.WORKER_SCALE
        out[:, 4] = p / F.WORKER_SCALE
        out[:, 5] = a
        out[:, 6] = m
        out[:, 7] = sp / max(req, 1e-12)
        with np.errstate(divide="ignore"):
            out[:, 8] = np.where(sp > 0, np.log1p(rem / np.maximum(sp, 1e-12) / F.HOUR), 0.0)
        restart = (w != (0 if cur_pl is None else cur_pl.n_workers)) | (p != (0 if cur_pl is None else cur_pl.n_ps))
        restart |= (a != (cur.arch == "ps")) | (m != (cur.mode == "async"))
        out[:, 9] = restart & (cur_pl is not None)
        out[WAIT, 9] = cur_pl is not None
        out[KEEP, 9] = 0.0
        out[:, 10] = servers / 4.0
        out[:, 11] = w / max(self.board.free_slots(), 1)
        out[~valid] = 0.0
        return np.clip(out, -F.BIG, F.BIG)

    def _obs(self) -> dict[str, np.ndarray]:
        view = self._view
        assert view is not None
        if self._done:
            mask = np.zeros(self.action_space.n, dtype=np.int8)
            mask[0] = 1  # terminal observation: keep one action valid for code that samples from it
            self._mask = mask
        topo = self.topo
        jobs = self._jobs_m.copy()
        n = self.n_dec
        cur = np.zeros(self.max_jobs, dtype=np.int8)
        if not self._done and 0 <= self.k < n:
            cur[self.k] = 1
        jobs[:, 1] = cur
        jobs[:, 2] = self.decided
        jobs[:, 3] = self.chosen / F.WORKER_SCALE
        if self._gpus_dirty:
            F.gpu_rows(self._gpus_m, topo, self.board, view, self.max_tasks, self.part)
            F.socket_rows(self._socks_m, topo, self.board, self.part)
            self._gpus_dirty = False
        jm = np.zeros(self.max_jobs, dtype=np.int8)
        jm[:n] = 1
        gm = np.zeros(self.max_gpus, dtype=np.int8)
        gm[: topo.n_gpus] = 1
        sm = np.zeros(self.max_sockets, dtype=np.int8)
        sm[: topo.n_sockets] = 1
        lm = np.zeros(self.max_links, dtype=np.int8)
        lm[: int(self.link_off[-1])] = 1
        occ = self.board.occ
        cluster = np.array([
            np.log1p(view.time_s / F.HOUR), len(view.jobs) / self.max_jobs,
            float(np.count_nonzero(~view.running)) / self.max_jobs,
            self.board.free_slots() / topo.n_gpus, float(np.count_nonzero(view.gpu_tasks == 0)) / topo.n_gpus,
            occ.cores_free.sum() / max(topo.server_cores.sum(), 1e-9),
            occ.mem_free.sum() / max(topo.server_mem_gb.sum(), 1e-9),
            max(n - self.k, 0) / self.max_jobs, np.log1p(self.decisions),
        ], dtype=np.float32)
        ctx = np.zeros(len(F.CONTEXT_FEATURES), dtype=np.float32)
        part = self.part
        if self._done:
            pass
        elif part is None:
            ctx[0] = 1.0
        else:
            ctx[1 if part.placing_worker else 2] = 1.0
            ctx[3] = (part.n_workers - len(part.gpus)) / F.WORKER_SCALE
            ctx[4] = (part.n_ps - len(part.sockets)) / F.WORKER_SCALE
            ctx[5] = (len(part.gpus) + len(part.sockets)) / max(part.n_workers + part.n_ps, 1)
        obs = {
            "jobs": jobs, "job_mask": jm, "gpus": self._gpus_m.copy(), "gpu_mask": gm,
            "gpu_groups": self._gpu_groups.copy(), "sockets": self._socks_m.copy(), "socket_mask": sm,
            "links": self._links_m.copy(), "link_mask": lm, "cluster": cluster, "context": ctx,
            "current_job": cur, "action_mask": self._mask.copy(),
        }
        if self.agent_allocates:
            obs["candidates"] = self._candidate_matrix() if not self._done else np.zeros(
                (self.n_cand, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
        return obs

    def _info(self) -> dict[str, Any]:
        return {
            "action_mask": self._mask.astype(bool), "time_s": self._view.time_s if self._view else 0.0,
            "decision_points": self.decisions, "workload_seed": self.workload_seed,
            "phase": "allocate" if self.phase == ALLOCATE else "place",
            "job_seconds": self.episode_job_s, "invalid_actions": self.invalid_actions,
            "idle_rescues": self.rescues,
        }
