"""One decision point decided job after job, with no gym and no
``Simulation``: what the environments and an RL scheduler running inside the
engine share.

Given a ``ClusterView`` (``begin``), the active jobs (arrival order, at most
``max_jobs``; the others wait) are decided one by one on a fresh ``Board``. A
job's *allocation* (workers, PSs, architecture, mode) is one slot of the
candidate menu chosen by the agent (``agent_allocates``) or a heuristic
allocation policy's; its *placement* is the agent's, one task per action
(``agent_places``: workers, then PSs), or the heuristic placement's. The
agent reads ``observation()`` and ``mask()`` and answers with ``act(a)``
until it returns False; ``decision()`` is then the point's ``Decision``.

The action layout: the candidate slots (``table``; only when the agent
allocates), then, when it places, one action per GPU (``max_gpus``), one per
socket (``max_sockets``) and *defer* (a dead end of a placement phase: the
job waits).

Everything a point needs comes from the view: profiles from
``view.catalogue``, predictions and link loads from ``view.perf`` (the
predictor), a job's own architecture and mode (whether they are open) from
the job as first seen (remembered by ``job_id``).

This module is the state machine (which job, which phase, what is
committed); its parts: ``pricing`` (the predictor's speeds of the menu),
``masks`` (the valid actions), ``observe`` (the observation), ``hint`` (the
hint heuristic, the window of jobs decided, the room held by running jobs).
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np
from gymnasium import spaces

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, ClusterView, Decision
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs import features as F
from hrlsched.envs.board import Board, PlacementIndex, link_layout
from hrlsched.envs.candidates import KEEP, WAIT, WORKER_OPTIONS, make_table
from hrlsched.envs.hint import Hint
from hrlsched.envs.masks import (
    CandidateMasks,
    HeuristicFeasibility,
    PartialPlacement,
    PlacementMasks,
    ValidSlots,
)
from hrlsched.envs.observe import Observer
from hrlsched.envs.pricing import Pricing, bound
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.hint import HintConfig
from hrlsched.policies.placement.frame import IncrementalPlacement

ALLOCATE, PLACE = 0, 1


class InvalidActionError(ValueError):
    """An action the mask does not allow."""


class PlaceChoice(Protocol):
    """A placement chosen at an allocation choice in place of the heuristic's (``DecisionPoint.place_choice``)."""

    def choose(self, dp: DecisionPoint, job: Job, pl: Placement) -> Placement:
        """The placement of ``job`` (the current job) given the heuristic's ``pl``; it must fit the board."""
        ...


class KeptPlacements(NamedTuple):
    """A level-2 point's jobs that keep their placements, committed when its
    board is built; ``loads``: the engine's (GPU tasks, server cores, server
    memory) where they are all its running jobs, else None."""

    jobs: list[Job]
    placements: list[Placement]
    loads: tuple[np.ndarray, np.ndarray, np.ndarray] | None


class DecisionPoint:
    """One decision point decided job after job: no gym, no Simulation.

    - ``topology``: the cluster (observations are padded to ``max_gpus``,
      ``max_sockets``, ``max_links``, default its own sizes, and to
      ``max_jobs`` jobs).
    - ``agent_allocates``/``agent_places``: which levels the agent decides;
      the other is the heuristic ``allocation``/``placement`` (policy
      objects; ``allocation`` only where the agent does not allocate). The
      heuristic placement also masks the allocation candidates: a candidate
      is valid only if it can place it on what is left. The placement is
      reset at each episode (and set to ``max_tasks_per_gpu``); each
      episode runs a fresh copy of ``allocation`` and ``hint``, as given.
    - ``worker_options``, ``ps_options``: the candidate menu (``candidates``).
    - ``max_tasks_per_gpu``: most workers (of any jobs) on one GPU.
    - ``skip_forced``: a job whose only valid choice is to wait is passed
      over without asking the agent.
    - ``hint`` (level 1): an allocation heuristic (an ``AllocationPolicy``,
      constructed with its options) run at each point; the observation shows
      its choice (``hint_workers`` per job, the nearest menu slot as
      ``is_hint``), so that a network can learn where to depart from it.
      None: those features are zero.
    - ``hint_config`` (level 1): the hint's settings (``HintConfig``, the one
      home of their docs and validation): which running jobs hold their room
      until their turn (``reserve_running``), which jobs a point decides and
      in which order (``window``; the point then works on the view with its
      jobs so ordered, ``ClusterView.permuted``, ``self.view``, so ``k``
      indexes that order), and a decision's ``recheck_s`` (asked again
      that many seconds later even if no job arrives or finishes). None:
      the defaults (all running jobs hold their room, arrival order, at
      events only).
    - ``rescue_idle``: a point that runs no job at all starts the first job
      the heuristic placement can place (at its request, else one worker);
      needed with decision points at events, where an idle cluster would
      never be asked again (counted in ``rescues``).

    Use: ``reset(rng)`` once per episode; at each point ``begin(view)``, then,
    while the agent has a choice, ``observation()``/``mask()`` and ``act(a)``;
    then ``decision()``. Observations are fresh arrays (the caller may keep
    or change them).
    """

    valid_slots: ValidSlots  # the current allocation choice's (``masks.CandidateMasks``)
    #: whether a point where the agent does not allocate runs the heuristic ``allocation`` (a subclass
    #: that decides the allocations its own way, ``envs.flat``, runs none)
    heuristic_allocation = True

    def __init__(
        self,
        topology: Topology,
        *,
        agent_allocates: bool,
        agent_places: bool,
        placement: IncrementalPlacement,
        allocation: AllocationPolicy | None = None,
        max_jobs: int,
        max_gpus: int | None = None,
        max_sockets: int | None = None,
        max_links: int | None = None,
        worker_options: Sequence[int] = WORKER_OPTIONS,
        ps_options: Sequence[str] = ("one", "half"),
        max_tasks_per_gpu: int = 1,
        skip_forced: bool = True,
        rescue_idle: bool = True,
        hint: AllocationPolicy | None = None,
        hint_config: HintConfig | None = None,
    ) -> None:
        if not (agent_allocates or agent_places):
            raise ValueError("DecisionPoint: the agent must decide at least one level")
        topo = topology
        self.topo = topo
        self.agent_allocates, self.agent_places = bool(agent_allocates), bool(agent_places)
        if not isinstance(placement, IncrementalPlacement):
            raise ValueError(f"placement: expected a job-by-job placement policy (an IncrementalPlacement), "
                             f"got {type(placement).__name__}")
        self.max_tasks = int(max_tasks_per_gpu)
        if self.max_tasks < 1:
            raise ValueError(f"max_tasks_per_gpu: expected >= 1, got {max_tasks_per_gpu}")
        placement.max_tasks_per_gpu = self.max_tasks
        self.placement_policy = placement
        self.feas = HeuristicFeasibility(placement)
        heuristic = not self.agent_allocates and self.heuristic_allocation
        if heuristic and not isinstance(allocation, AllocationPolicy):
            raise ValueError(f"allocation: expected the heuristic allocation policy of a point where the agent "
                             f"does not allocate (an AllocationPolicy), got {type(allocation).__name__}")
        if hint is not None and not isinstance(hint, AllocationPolicy):
            raise ValueError(f"hint: expected an allocation policy (an AllocationPolicy) or None, "
                             f"got {type(hint).__name__}")
        self.allocation = allocation if heuristic else None  # copied at each episode
        self.link_off, self.link_kind, self.link_cap = link_layout(topo)
        n_links = int(self.link_off[-1])
        self.n_links = n_links
        self.max_jobs = int(max_jobs)
        self.max_gpus = int(max_gpus if max_gpus is not None else topo.n_gpus)
        self.max_sockets = int(max_sockets if max_sockets is not None else topo.n_sockets)
        self.max_links = int(max_links if max_links is not None else n_links)
        for name, have, cap in (("max_gpus", topo.n_gpus, self.max_gpus), ("max_sockets", topo.n_sockets,
                                self.max_sockets), ("max_links", n_links, self.max_links)):
            if have > cap:
                raise ValueError(f"{name}: the cluster has {have}, more than {name}={cap}")
        if self.max_jobs < 1:
            raise ValueError(f"max_jobs: expected >= 1, got {self.max_jobs}")
        t = self.table = make_table(worker_options, ps_options, topo.n_gpus)
        self.n_cand = t.size if self.agent_allocates else 0
        self.place_off = self.n_cand
        self.defer_action = self.place_off + self.max_gpus + self.max_sockets
        self.n_actions = self.n_cand + (self.max_gpus + self.max_sockets + 1 if self.agent_places else 0)
        self.observation_space: spaces.Dict = F.observation_space(
            self.max_jobs, self.max_gpus, self.max_links, self.n_actions,
            self.n_cand if self.agent_allocates else None, self.max_sockets,
        )
        self.skip_forced = bool(skip_forced)
        self.rescue_idle = bool(rescue_idle)
        cfg = hint_config if hint_config is not None else HintConfig(policy=None)
        if not isinstance(cfg, HintConfig):
            raise ValueError(f"hint_config: expected a HintConfig or None, got {type(cfg).__name__}")
        self.hint = Hint(hint if self.agent_allocates else None, cfg, self.max_jobs)
        self.recheck_s = cfg.recheck_s
        self.pricing = Pricing(t, topo.n_gpus)
        self.masks = CandidateMasks(t, self.n_actions, self.feas, self.pricing)
        self.place_masks = PlacementMasks(self.n_actions, self.place_off, self.max_gpus, self.defer_action, topo)
        self.placement_index = PlacementIndex(topo, self.link_off)
        self.view: ClusterView | None = None
        self.alloc_policy: AllocationPolicy | None = None
        self._mask = np.zeros(self.n_actions, dtype=np.int8)
        self.obs = Observer(self)
        # level 2 over the heuristic placement (``agent.placement_choice``): where set, a job placed
        # anew at an allocation choice takes ``place_choice.choose(self, job, pl)`` in place of the
        # heuristic's ``pl`` (the masks stay the heuristic's); None: the heuristic's
        self.place_choice: PlaceChoice | None = None
        self.reset(np.random.default_rng(0))

    # ------------------------------------------------------------ episode
    def reset(self, rng: np.random.Generator, workload: object | None = None) -> None:
        """A new episode: the heuristic policies are reset (seeded from
        ``rng``) and every cache of the last episode is dropped, except
        where ``workload`` (an object standing for the episode's jobs: the
        environments pass their ``Simulation``) was seen in one of the last
        ``WORKLOADS_KEPT`` episodes: then what was learnt of its jobs (their
        profiles, variants, facts and predicted speeds) is taken up again,
        its predicted speeds only while the predictor is the same object
        (``begin`` checks)."""
        self.placement_policy.reset(self.topo, np.random.default_rng(rng.integers(2**63)))
        self.alloc_policy = None
        if self.allocation is not None:
            self.alloc_policy = copy.deepcopy(self.allocation)
            self.alloc_policy.reset(self.topo, np.random.default_rng(rng.integers(2**63)))
        self.hint.reset(self.topo, rng)
        w = self.pricing.reset(workload)
        self.profiles, self.base_jobs = w.profiles, w.base_jobs
        # every cache that may grow without end, bounded at each point
        self._caches = (*w.priced(), *self.masks.caches(), *self.obs.caches(), *self.hint.caches())
        self.placement_index.clear()
        self.decisions = 0  # decision() calls since reset
        self.obs.reset()
        self.rescues = 0
        self.view = None
        self._board: Board | None = None
        self._kept: KeptPlacements | None = None

    # ------------------------------------- the hint's settings and state
    @property
    def hint_policy(self) -> AllocationPolicy | None:
        """This episode's hint heuristic (None: no hint)."""
        return self.hint.policy

    @property
    def hints(self) -> dict[int, Allocation]:
        """The hint's allocations at this point, by job id."""
        return self.hint.allocs

    @property
    def window(self) -> str:
        return self.hint.window

    @property
    def reserve_running(self) -> bool | str:
        return self.hint.reserve_running

    # ----------------------------------------------------- decision points
    def begin(self, view: ClusterView) -> bool:
        """Set up a decision point on ``view``; True if the agent has a choice
        (False: the point is already decided, ``decision()`` is ready)."""
        self.pricing.begin(view)
        bound(self._caches)
        if self.agent_allocates:
            self.pricing.price_menus(view, self.masks.slots)
        view = self.hint.order(view)  # the hint first where it orders the jobs
        self.view = view
        self._board = None
        self._kept = None  # kept placements, committed when the board is built
        if self.agent_allocates:
            self._board = Board(view, self.max_tasks, self.profiles, self.link_off, self.placement_index)
        self.hint.allocate(view)
        n = min(len(view.jobs), self.max_jobs)
        self.n_dec = n
        self.k = -1  # job being decided
        self.phase = ALLOCATE
        self.part: PartialPlacement | None = None
        self.placements: dict[int, Placement] = {}
        self.arch: dict[int, str] = {}
        self.mode: dict[int, str] = {}
        # the running jobs, in order: read by the allocation phase only (a level-2 point has none)
        self._running = [k for k, pl in enumerate(view.placements[:n]) if pl is not None] if self.agent_allocates else []
        self._reserved = np.zeros(n, dtype=bool)
        if self.agent_allocates:
            held = self.hint.held(view, self._running)
            if held:
                self.board.reserve([view.jobs[k] for k in held], [view.placements[k] for k in held])
                self._reserved[held] = True
        self.decided = np.zeros(self.max_jobs)  # the jobs decided (the observation's)
        self.chosen = np.zeros(self.max_jobs)  # workers chosen
        self.obs.begin()
        # Level-2 only: the heuristic allocations, in priority order; kept jobs committed first.
        self.queue: list[tuple[int, Allocation]] = []
        if not self.agent_allocates:
            assert self.alloc_policy is not None
            allocs = self.alloc_policy.allocate(view)
            # (job, its placement if kept, workers, PSs); the allocations of the others are made below
            todo: list[tuple[int, Job, Placement | None, int, int]] = []
            kj: list[Job] = []  # the kept ones (jobs, placements), gathered in the same pass
            kp: list[Placement] = []
            vjobs, vpls = view.jobs, view.placements
            index = view.index
            for jid, al in allocs.items():
                k = index(jid)
                if k >= n or al.workers < 1:
                    continue
                # ``_effective`` where the allocation leaves the architecture and mode as they are (FIFO's)
                job = vjobs[k] if al.arch is None and al.mode is None else self._effective(k, al.arch, al.mode)
                pl = vpls[k]
                nps = max(al.ps, 1) if job.arch == "ps" else 0
                keep = pl is not None and job is vjobs[k] and len(pl.gpus) == al.workers and len(pl.ps_sockets) == nps
                if keep:
                    kj.append(job)
                    kp.append(pl)
                todo.append((k, job, pl if keep else None, al.workers, nps))
            # The engine's loads are those of the kept placements where they are all its running
            # jobs and every figure is a whole number (sums exact in any order, as the board's).
            loads = (view.gpu_tasks, view.server_cores_used, view.server_mem_used) \
                if self.pricing.workload.whole and len(kp) == len(vpls) - vpls.count(None) else None
            if len(kp) == len(todo) and (kp or not self.rescue_idle):
                # Nothing to place (every allocated job keeps its placement; they fit together,
                # the engine ran them so): the point needs no board, unless something asks for it.
                self._record_many(kj, kp)
                self._kept = KeptPlacements(kj, kp, loads)
            elif self.board.commit_kept(kj, kp, loads):  # the usual case
                self._record_many(kj, kp)
                self.queue = [(k, Allocation(w, p, None, job.arch, job.mode)) for k, job, pl, w, p in todo
                              if pl is None]
            else:  # one after the other; a kept job that no longer fits is placed anew
                for k, job, pl, w, p in todo:
                    if pl is not None and self.board.fits(job, pl):
                        self._commit(k, job, pl)
                    else:
                        self.queue.append((k, Allocation(w, p, None, job.arch, job.mode)))
        return self._next_choice()

    @property
    def board(self) -> Board:
        """Room left and what is decided at this point; at a level-2 point with
        nothing to place, built (with the kept placements) only when asked for."""
        b = self._board
        if b is None:
            assert self.view is not None, "no decision point yet"
            b = self._board = Board(self.view, self.max_tasks, self.profiles, self.link_off, self.placement_index)
            if self._kept is not None:
                ok = b.commit_kept(*self._kept)
                assert ok, "kept placements that the engine ran together do not fit together"
        return b

    def observation(self, full: bool = True) -> dict[str, np.ndarray]:
        """The observation of the current choice (see ``features``).
        ``full=False``: only what changes from one choice to the next in an
        allocation phase (cluster, context, current job, candidates, mask),
        for a network that encodes the rest once per point."""
        assert self.view is not None, "DecisionPoint: begin(view) first"
        return self.obs.observation(full, self.phase == ALLOCATE and 0 <= self.k < self.n_dec)

    def allocation_rows(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """An allocation choice as a level-1 scorer reads it, without
        building what it does not read: (the current job's index, the cluster
        row, the context row, the candidate rows of the valid slots in
        two parts ``base`` and ``dyn`` (``observe``), the valid actions'
        indices); the same values as ``observation(full=False)``. A scorer
        that keeps what it computes of ``base`` (the same object again while
        the key is unchanged) redoes per choice only the columns
        ``DYN_COLUMNS``. Only in an allocation phase."""
        assert self.view is not None and self.agent_allocates and self.phase == ALLOCATE and 0 <= self.k < self.n_dec
        return self.obs.allocation_rows()

    def rule_rows(self) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
        """What the agent's two rules read of an allocation choice (``agent.rules.add_rules``),
        without the rest of ``allocation_rows``: (the valid slots' speed over the request,
        float32 as ``dyn``'s column; the hint's row, -1 without a hint; their worker counts
        as ``base``'s column; the valid actions' indices). The same values as those
        columns of ``allocation_rows``. Only in an allocation phase."""
        assert self.view is not None and self.agent_allocates and self.phase == ALLOCATE and 0 <= self.k < self.n_dec
        return self.obs.rule_rows()

    def residual_rows(self) -> tuple[float, float, np.ndarray, np.ndarray]:
        """What the agent's residual reads of an allocation choice besides ``rule_rows``
        (``agent.residual.residual_scores_at``): (the shares of GPUs idle at the point's start
        and of jobs queued, as the cluster row's float32 ``free_gpus_before`` and
        ``queued_jobs``; per pair of menu slots, whether the second has the first's
        architecture and mode and twice its workers, and the same for half, as a bool matrix of
        ``table.size`` rows each, wait and keep nobody's partner). What ``allocation_rows``' rows
        tell the residual, with the slots' kinds (fixed per slot but keep's) made once. Only in
        an allocation phase."""
        assert self.view is not None and self.agent_allocates and self.phase == ALLOCATE and 0 <= self.k < self.n_dec
        return self.obs.residual_rows()

    def mask(self) -> np.ndarray:
        """Valid actions of the current choice (int8, ``n_actions``)."""
        return self._mask

    def act(self, a: int) -> bool:
        """Apply a valid action (``InvalidActionError`` otherwise). True while
        the agent has more choices at this point."""
        a = int(a)
        if not (0 <= a < self.n_actions) or not self._mask[a]:
            raise InvalidActionError(f"action {a}: {self.why_invalid(a)}")
        if self.phase == ALLOCATE:
            self._choose_candidate(a)
        else:
            self._place_task(a)
        if self.phase == PLACE and self.part is not None:
            return True
        return self._next_choice()

    def skip(self) -> bool:
        """The current job waits whatever the mask says (*wait* in an
        allocation phase, *defer* in a placement phase): the fallback of an
        environment that tolerates invalid actions. Returns as ``act``."""
        if self.phase == ALLOCATE:
            self._choose_candidate(WAIT)
        else:
            self._place_task(self.defer_action)
        if self.phase == PLACE and self.part is not None:
            return True
        return self._next_choice()

    def decision(self) -> Decision:
        """The finished point's ``Decision`` (with the idle rescue when
        ``rescue_idle`` and it runs nothing)."""
        if not self.placements and self.rescue_idle:
            self._rescue_idle()
        self.decisions += 1
        recheck = None if self.recheck_s is None else self.view.time_s + self.recheck_s  # type: ignore[union-attr]
        d = Decision(placements=dict(self.placements), arch=self.arch, mode=self.mode, recheck_s=recheck)
        return self.placement_policy.finish(self.view, d)  # type: ignore[arg-type]  # migrate's moves come here

    def why_invalid(self, a: int) -> str:
        """Why action ``a`` is not allowed now (the message of ``InvalidActionError``)."""
        if not 0 <= a < self.n_actions:
            return f"out of range 0..{self.n_actions - 1}"
        if a < self.n_cand:
            if self.phase != ALLOCATE:
                return "an allocation candidate while a task is being placed"
            t = self.table
            what = {WAIT: "wait", KEEP: "keep the current allocation"}.get(
                a, f"{t.workers[a]} workers, {t.ps[a]} PS, {ARCHS[t.arch[a]]}, {MODES[t.mode[a]]}")
            return f"candidate {what} is masked for job {self.view.jobs[self.k].job_id}: " \
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

    # ------------------------------------------------------------ internals
    def _effective(self, k: int, arch: str | None, mode: str | None) -> Job:
        """Job ``k`` with ``arch``/``mode`` where it leaves them open (made once per workload)."""
        return self.pricing.workload.effective(self.view.jobs[k], arch, mode)  # type: ignore[union-attr]

    def _next_choice(self) -> bool:
        """Move to the next job that needs the agent; False when the point is done."""
        view = self.view
        assert view is not None
        if self.agent_allocates:
            decided, n = self.decided, self.n_dec
            while True:
                self.k += 1
                k = self.k
                if k >= n:
                    return False
                self.phase = ALLOCATE
                if self.skip_forced:
                    if self.board.free_slots() == 0:  # a full board: only running jobs may choose (keep)
                        i = bisect.bisect_left(self._running, k)
                        r = self._running[i] if i < len(self._running) else n
                        if r > k:
                            decided[k:r] = 1.0
                            self.k = k = r
                            if k >= n:
                                return False
                if self._reserved[k]:  # its turn: its room is free for its own choice
                    self._reserved[k] = False
                    self.board.release(view.jobs[k], view.placements[k])
                    self.obs.rows_dirty = True
                if self.skip_forced:
                    if self.masks.forced(self.board, view.jobs[k], view.placements[k]):
                        decided[k] = 1.0
                        continue
                vs = self.valid_slots = self.masks.valid(view, self.board, k)
                self._mask = vs.mask.copy()
                if not self.skip_forced or len(vs.idx) > 1:  # more than wait
                    return True
                decided[k] = 1.0
        while self.queue:
            k, al = self.queue.pop(0)
            self.k = k
            job = self._effective(k, al.arch, al.mode)
            if not self.feas.placeable(view, self.board, job, al.workers, al.ps):
                continue  # cannot be placed now: it waits
            self._begin_place(job, al.workers, al.ps)
            return True
        return False

    def _rescue_idle(self) -> None:
        """An empty decision with decision points at events would leave the
        cluster idle until the time limit (no arrival or completion would
        come to ask again), so the first job (arrival order) that the heuristic
        placement can place at its request, or else with one worker, starts."""
        view = self.view
        assert view is not None
        self.rescues += 1
        for k, job in enumerate(view.jobs):
            for w in (job.requested_gpus, 1):
                pl = self.feas.place(view, self.board, job, w, job.num_ps_requested)
                if pl is not None:
                    self._commit(k, job, pl)
                    return

    # -------------------------------------------------------- allocation
    def _choose_candidate(self, c: int) -> None:
        view, k, t = self.view, self.k, self.table
        assert view is not None
        self.decided[k] = 1.0
        if c == WAIT:
            return
        cur_pl = view.placements[k]
        if c == KEEP:
            assert cur_pl is not None
            self.chosen[k] = cur_pl.n_workers
            self._commit(k, view.jobs[k], cur_pl)
            return
        job = self.pricing.slot_job(view.jobs[k], c)
        w, p = int(t.workers[c]), int(t.ps[c])
        self.chosen[k] = w
        if self.agent_places:
            self._begin_place(job, w, p)
            return
        if cur_pl is not None and job is view.jobs[k] and cur_pl.n_workers == w and cur_pl.n_ps == p \
                and self.board.fits(job, cur_pl):
            pl: Placement | None = cur_pl  # the same allocation: stay in place, no restart
        else:
            pl = self.feas.place(view, self.board, job, w, p)
            if pl is not None and self.place_choice is not None:
                pl = self.place_choice.choose(self, job, pl)
        if pl is None:
            raise RuntimeError(f"job {job.job_id}: candidate {c} ({w} workers, {p} PS) was allowed, but the "
                               f"{self.placement_policy.name} placement cannot place it (a mask bug)")
        self._commit(k, job, pl)

    def _commit(self, k: int, job: Job, pl: Placement) -> None:
        self.board.commit(job, pl)
        self._record(job, pl)

    def _record(self, job: Job, pl: Placement) -> None:
        """A committed placement: into the decision, the link and GPU rows."""
        self._record_many((job,), (pl,))

    def _record_many(self, jobs: Sequence[Job], pls: Sequence[Placement]) -> None:
        """``_record`` of each (the kept placements of a point: one loop, no call per job)."""
        placements, arch, mode, bases = self.placements, self.arch, self.mode, self.base_jobs
        for job, pl in zip(jobs, pls):
            jid = job.job_id
            placements[jid] = pl
            base = bases[jid]
            if base.arch_open:
                arch[jid] = job.arch
            if base.mode_open:
                mode[jid] = job.mode
        self.obs.rows_dirty = True

    # --------------------------------------------------------- placement
    def _begin_place(self, job: Job, w: int, p: int) -> None:
        self.phase = PLACE
        self.part = PartialPlacement(self.board, job, w, p)  # the rows do not change: no task of it yet
        self._mask = self.place_masks.first(self.part)

    def _place_task(self, a: int) -> None:
        part = self.part
        assert part is not None
        k = self.k
        if a == self.defer_action:
            self.part = None
            self.decided[k] = 1.0
            self.chosen[k] = 0.0
            self.obs.rows_dirty = True
            return
        o = self.place_off
        worker = part.placing_worker
        if worker:
            part.place_worker(a - o)
            self.obs.worker_placed(part, a - o)
        else:
            part.place_ps(a - o - self.max_gpus)
            self.obs.ps_placed(part, a - o - self.max_gpus)
        if part.complete:
            self.part = None
            self._commit(k, part.job, part.placement())
            self.decided[k] = 1.0
            self.chosen[k] = part.n_workers
            return
        if worker and part.placing_worker:  # the next worker: the last mask, narrowed where this one went
            self._mask = self.place_masks.after_worker(self._mask, part, a - o)
        else:
            self._mask = self.place_masks.first(part)
