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
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
from gymnasium import spaces

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, ClusterView, Decision, effective_job
from hrlsched.core.catalogue import ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs import features as F
from hrlsched.envs.board import Board, PlacementIndex, link_layout
from hrlsched.envs.candidates import KEEP, WAIT, WORKER_OPTIONS, make_table, nearest_slot
from hrlsched.envs.masks import HeuristicFeasibility, PartialPlacement
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.registry import ALLOCATIONS, PLACEMENTS

ALLOCATE, PLACE = 0, 1
#: ``reserve_running`` by its command-line name: which running jobs hold their room until their turn
RESERVE_RUNNING: dict[str, bool | str] = {"all": True, "none": False, "hint": "hint"}
#: ``window``: which jobs a point decides (the first ``max_jobs`` of arrival order, or of the hint's order)
#: and in which order (arrival order, or the hint's for ``"hint-order"``)
WINDOWS = ("arrival", "hint", "hint-order")
# The candidate columns that change from one choice to the next (``_candidate_rows``'s ``dyn``):
# speed over the request, hours to finish, servers spanned, share of the free GPUs, hint.
DYN_COLUMNS = tuple(F.CANDIDATE_FEATURES.index(c) for c in (
    "speed_vs_requested", "log_hours_to_finish", "servers_spanned", "share_of_free_gpus", "is_hint"))


# Workloads whose job caches a decision point keeps between episodes (a training pool's seeds).
WORKLOADS_KEPT = 16


class _JobCaches:
    """What a decision point learns of one workload's jobs: their profiles
    (and whether every CPU and memory figure of them is a whole number),
    first-seen jobs and architecture/mode variants, and what the predictor
    says of them (speeds, job facts, menu speeds), kept for the predictor
    ``priced_by`` only."""

    def __init__(self) -> None:
        self.profiles: dict[str, ModelProfile] = {}
        self.whole = True
        self.base_jobs: dict[int, Job] = {}
        self.variants: dict[tuple[int, str, str], Job] = {}
        self.priced_by: object | None = None
        self.speed_cache: dict[tuple, float] = {}
        self.facts: dict[tuple, tuple[float, ...]] = {}
        self.slot_speed: dict[tuple[int | str, int], np.ndarray] = {}
        self.valid_speeds: dict[tuple[int | str, int, bytes, float], tuple[float, np.ndarray, np.ndarray, np.ndarray]] = {}

    def drop_priced(self, perf: object) -> None:
        for c in (self.speed_cache, self.facts, self.slot_speed, self.valid_speeds):
            c.clear()
        self.priced_by = perf


class InvalidActionError(ValueError):
    """An action the mask does not allow."""


class DecisionPoint:
    """One decision point decided job after job: no gym, no Simulation.

    - ``topology``: the cluster (observations are padded to ``max_gpus``,
      ``max_sockets``, ``max_links``, default its own sizes, and to
      ``max_jobs`` jobs).
    - ``agent_allocates``/``agent_places``: which levels the agent decides;
      the other is the heuristic ``allocation``/``placement`` (by registry
      name). The heuristic placement also masks the allocation candidates: a
      candidate is valid only if it can place it on what is left.
    - ``worker_options``, ``ps_options``: the candidate menu (``candidates``).
    - ``max_tasks_per_gpu``: most workers (of any jobs) on one GPU.
    - ``skip_forced``: a job whose only valid choice is to wait is passed
      over without asking the agent.
    - ``hint``: an allocation heuristic (registry name) run at each point;
      the observation shows its choice (``hint_workers`` per job, the
      nearest menu slot as ``is_hint``), so that a network can learn where
      to depart from it. None: those features are zero. ``hint_options``:
      the heuristic's constructor arguments.
    - ``reserve_running`` (level 1): the running jobs hold their room until
      they are decided, so a job decided before them cannot take their GPUs
      and force them to restart (the heuristic schedulers commit the jobs
      they keep first); a running job's room is given back when its turn
      comes, whatever it then chooses. ``"hint"``: only the running jobs
      that the hint keeps as they run hold their room (a job the hint
      changes restarts anyway, and holding its room kept earlier jobs from
      the GPUs the hint meant them to have: menu slots below the hint's).
    - ``window`` (level 1, with a hint): which jobs a point decides, the
      first ``max_jobs`` of its jobs in arrival order (``"arrival"``), or in
      the hint's order (``"hint"``): the jobs the hint runs in its priority
      order (``AllocationPolicy.priority``), then the others in arrival
      order; those are decided in arrival order (as the hint's own
      allocation is placed), or in the hint's order (``"hint-order"``).
      The point then works on the view with its jobs so ordered
      (``ClusterView.permuted``; ``self.view``), so ``k`` indexes that order.
    - ``recheck_s``: each decision asks to be asked again this many seconds
      later even if no job arrives or finishes (``Decision.recheck_s``, under
      decision points at events), e.g. the hint's own re-allocation interval
      (``Optimus.interval_s``, 600 s); None: at the next event only.
    - ``rescue_idle``: a point that runs no job at all starts the first job
      the heuristic placement can place (at its request, else one worker);
      needed with decision points at events, where an idle cluster would
      never be asked again (counted in ``rescues``).

    Use: ``reset(rng)`` once per episode; at each point ``begin(view)``, then,
    while the agent has a choice, ``observation()``/``mask()`` and ``act(a)``;
    then ``decision()``. Observations are fresh arrays (the caller may keep
    or change them).
    """

    def __init__(
        self,
        topology: Topology,
        *,
        agent_allocates: bool,
        agent_places: bool,
        placement: str = "pack",
        allocation: str = "fifo",
        max_jobs: int,
        max_gpus: int | None = None,
        max_sockets: int | None = None,
        max_links: int | None = None,
        worker_options: Sequence[int] = WORKER_OPTIONS,
        ps_options: Sequence[str] = ("one", "half"),
        max_tasks_per_gpu: int = 1,
        skip_forced: bool = True,
        rescue_idle: bool = True,
        hint: str | None = None,
        reserve_running: bool | str = True,
        hint_options: Mapping[str, float] | None = None,
        window: str = "arrival",
        recheck_s: float | None = None,
    ) -> None:
        if not (agent_allocates or agent_places):
            raise ValueError("DecisionPoint: the agent must decide at least one level")
        topo = topology
        self.topo = topo
        self.agent_allocates, self.agent_places = bool(agent_allocates), bool(agent_places)
        if placement not in PLACEMENTS:
            raise ValueError(f"placement: unknown placement {placement!r}; expected one of {sorted(PLACEMENTS)}")
        pol = PLACEMENTS[placement].factory()
        if not isinstance(pol, IncrementalPlacement):
            raise ValueError(f"placement {placement!r}: expected a job-by-job placement policy")
        self.max_tasks = int(max_tasks_per_gpu)
        if self.max_tasks < 1:
            raise ValueError(f"max_tasks_per_gpu: expected >= 1, got {max_tasks_per_gpu}")
        pol.max_tasks_per_gpu = self.max_tasks
        self.placement_policy = pol
        self.feas = HeuristicFeasibility(pol)
        self.allocation_name = allocation
        if not self.agent_allocates and allocation not in ALLOCATIONS:
            raise ValueError(f"allocation: unknown policy {allocation!r}; expected one of {sorted(ALLOCATIONS)}")
        if hint is not None and hint not in ALLOCATIONS:
            raise ValueError(f"hint: unknown allocation policy {hint!r}; expected one of {sorted(ALLOCATIONS)} "
                             "or none")
        self.hint_name = hint if self.agent_allocates else None
        self.hint_options = dict(hint_options or {})
        if self.hint_options:
            if hint is None:
                raise ValueError(f"hint_options: {self.hint_options} given without a hint")
            try:
                ALLOCATIONS[hint].factory(**self.hint_options)
            except TypeError as e:
                raise ValueError(f"hint_options: {self.hint_options} do not fit the hint {hint!r}: {e}") from None
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
        if reserve_running not in RESERVE_RUNNING.values():
            raise ValueError(f"reserve_running: expected true, false or 'hint', got {reserve_running!r}")
        self.reserve_running = reserve_running
        if window not in WINDOWS or (window != "arrival" and self.hint_name is None):
            raise ValueError(f"window: expected one of {WINDOWS} ('hint' with a hint and the agent allocating), "
                             f"got {window!r}")
        self.window = window
        if recheck_s is not None and not (recheck_s > 0 and math.isfinite(recheck_s)):
            raise ValueError(f"recheck_s: expected a positive number of seconds or None, got {recheck_s!r}")
        self.recheck_s = None if recheck_s is None else float(recheck_s)
        # What never changes: static observation parts, the menu's columns.
        self._gpu_groups = F.gpu_groups(topo, self.max_gpus)
        self._links_static = F.static_links(self.link_kind, self.link_cap, self.max_links)
        self._rows = F.Rows(topo, self.max_gpus, self.max_sockets, self.max_tasks)
        self._cores_total = max(topo.server_cores.sum(), 1e-9)
        self._mem_total = max(topo.server_mem_gb.sum(), 1e-9)
        self._gm = np.zeros(self.max_gpus, dtype=np.int8)
        self._gm[: topo.n_gpus] = 1
        self._sm = np.zeros(self.max_sockets, dtype=np.int8)
        self._sm[: topo.n_sockets] = 1
        self._lm = np.zeros(self.max_links, dtype=np.int8)
        self._lm[:n_links] = 1
        self._one_hot = np.eye(self.max_jobs + 1, self.max_jobs, dtype=np.int8)  # ``current_job`` per k; last: none
        self._ctx_alloc = np.zeros(len(F.CONTEXT_FEATURES), dtype=np.float32)
        self._ctx_alloc[0] = 1.0
        self._tw, self._tp = t.workers.astype(float), t.ps.astype(float)
        self._ta, self._tm = (t.arch == 0).astype(float), (t.mode == 1).astype(float)
        self._min_workers = int(t.workers[t.workers > 0].min())
        cs = np.zeros((t.size, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
        cs[WAIT, 1] = 1.0
        cs[KEEP, 2] = 1.0
        cs[:, 3] = self._tw / F.WORKER_SCALE  # wait and keep: 0 (keep's are the job's own)
        cs[:, 4] = self._tp / F.WORKER_SCALE
        cs[:, 5] = self._ta
        cs[:, 6] = self._tm
        self._cand_static = cs
        self._no_restart = np.zeros(t.size)
        self._restart_sets: dict[tuple, np.ndarray] = {}
        self._share: dict[tuple, np.ndarray] = {}  # the valid slots' workers over the free GPUs, per (free, slots)
        self._spanned: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # servers spanned / 4 on the valid slots
        self._zeros: dict[int, np.ndarray] = {}  # a zero column per number of valid slots
        self._slot_sets: dict[tuple, np.ndarray] = {}
        self._slot_rules: dict[tuple, tuple[np.ndarray, np.ndarray, list[int]]] = {}  # valid by the rules / to ask
        self._nearest: dict[tuple, int] = {}  # the hint's slot, per (valid slots, hint)
        self._valid_sets: dict[bytes, tuple[list[int], np.ndarray, np.ndarray, np.ndarray]] = {}
        self._cand_base: dict[tuple, np.ndarray] = {}  # the candidate rows' fixed part (``_candidate_matrix``)
        self._cand_full: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # per ``base``: (it, full, flat)
        self._menu_ps: dict[tuple, bool] = {}
        self._menu_most: dict[tuple, int] = {}  # most workers of a menu's slots
        self._ps_most: dict[tuple, float] = {}  # most PS room a menu's slot needs, per PS room one worker takes
        self._index = PlacementIndex(topo, self.link_off)
        self._workloads: dict[object, _JobCaches] = {}  # see reset, least recently used first
        self.view: ClusterView | None = None
        self.alloc_policy: AllocationPolicy | None = None
        self._mask = np.zeros(self.n_actions, dtype=np.int8)
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
        if not self.agent_allocates:
            self.alloc_policy = ALLOCATIONS[self.allocation_name].factory()  # type: ignore[assignment]
            self.alloc_policy.reset(self.topo, np.random.default_rng(rng.integers(2**63)))
        self.hint_policy: AllocationPolicy | None = None
        if self.hint_name is not None:
            self.hint_policy = ALLOCATIONS[self.hint_name].factory(**self.hint_options)  # type: ignore[assignment]
            self.hint_policy.reset(self.topo, np.random.default_rng(rng.integers(2**63)))
        self._hints: dict[int, Allocation] = {}
        known = self._workloads.pop(workload, None) if workload is not None else None
        c = known if known is not None else _JobCaches()
        if workload is not None:
            self._workloads[workload] = c
            while len(self._workloads) > WORKLOADS_KEPT:
                del self._workloads[next(iter(self._workloads))]  # the least recently used
        self._jc = c
        self.profiles, self.base_jobs, self._variants = c.profiles, c.base_jobs, c.variants
        self._speed_cache, self._facts = c.speed_cache, c.facts
        self._slot_speed, self._valid_speeds = c.slot_speed, c.valid_speeds
        self._index.clear()
        self.decisions = 0  # decision() calls since reset
        self._past = (-1, 0.0)  # (decisions, their feature)
        self.rescues = 0
        self.view = None
        self._board: Board | None = None
        self._kept: tuple[list[Job], list[Placement], tuple | None] | None = None

    # ----------------------------------------------------- decision points
    def begin(self, view: ClusterView) -> bool:
        """Set up a decision point on ``view``; True if the agent has a choice
        (False: the point is already decided, ``decision()`` is ready)."""
        jc = self._jc
        if view.perf is not jc.priced_by:  # predicted speeds are the predictor's
            jc.drop_priced(view.perf)
        profiles, bases = self.profiles, self.base_jobs
        for job in view.jobs:
            if job.job_id not in bases:
                bases[job.job_id] = job
                if job.model not in profiles:
                    pr = profiles[job.model] = get_profile(job.model, view.catalogue)
                    jc.whole = jc.whole and all(
                        float(x).is_integer() for x in (pr.worker_cores, pr.worker_mem_gb, pr.ps_cores, pr.ps_mem_gb))
        self.view = view  # (read by the pricing; permuted below when the hint orders the jobs)
        if self.agent_allocates:
            self._price_menus(view)
        hints = None
        if self.window != "arrival" and self.hint_policy is not None:  # the hint first, to order the jobs by it
            hints = self.hint_policy.allocate(view)
            view = view.permuted(self._window_order(view, hints))
        self.view = view
        self._board = None
        self._kept = None  # kept placements, committed when the board is built
        if self.agent_allocates:
            self._board = Board(view, self.max_tasks, profiles, self.link_off, self._index)
        if self.hint_policy is not None:  # called at every point: the heuristic keeps its own state
            self._hints = self.hint_policy.allocate(view) if hints is None else hints
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
        if self.agent_allocates and self.reserve_running and self._running:
            held = self._running
            if self.reserve_running == "hint" and self.hint_policy is not None:
                held = [k for k in held if self._hint_keeps(k)]
            if held:
                self.board.reserve([view.jobs[k] for k in held], [view.placements[k] for k in held])
                self._reserved[held] = True
        self._decided = np.zeros(self.max_jobs)
        self._chosen = np.zeros(self.max_jobs)  # workers chosen
        self._prepared = False  # the point's share of the observation: made at its first observation
        self._rows_dirty = True
        self._cluster_board: tuple[int, tuple[float, ...]] = (-1, ())
        self._links_version = -1
        self._servers: dict[tuple[int, str], np.ndarray] = {}  # servers spanned per slot, by (board version, model)
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
                if jc.whole and len(kp) == len(vpls) - vpls.count(None) else None
            if len(kp) == len(todo) and (kp or not self.rescue_idle):
                # Nothing to place (every allocated job keeps its placement; they fit together,
                # the engine ran them so): the point needs no board, unless something asks for it.
                self._record_many(kj, kp)
                self._kept = (kj, kp, loads)
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
            b = self._board = Board(self.view, self.max_tasks, self.profiles, self.link_off, self._index)
            if self._kept is not None:
                ok = b.commit_kept(*self._kept)
                assert ok, "kept placements that the engine ran together do not fit together"
        return b

    def _window_order(self, view: ClusterView, hints: dict[int, Allocation]) -> list[int]:
        """``window="hint"``/``"hint-order"``: the jobs the hint runs in its
        priority order, then the others in arrival order, the first
        ``max_jobs`` of them in arrival order for ``"hint"`` (indices into
        ``view.jobs``)."""
        assert self.hint_policy is not None
        first = [view.index(j) for j in self.hint_policy.priority(hints) if hints[j].workers > 0]
        taken = set(first)
        order = first + [k for k in range(len(view.jobs)) if k not in taken]
        if self.window == "hint":
            order[: self.max_jobs] = sorted(order[: self.max_jobs])
        return order

    def _hint_keeps(self, k: int) -> bool:
        """The hint keeps running job ``k`` as it runs (same workers, PSs,
        architecture and mode): only then is its room worth holding, since any
        other choice restarts it wherever it goes."""
        view = self.view
        assert view is not None
        job, pl = view.jobs[k], view.placements[k]
        al = self._hints.get(job.job_id)
        if al is None or pl is None or al.workers != len(pl.gpus) or al.arch not in (None, job.arch) \
                or al.mode not in (None, job.mode):
            return False
        return (max(al.ps, 1) if job.arch == "ps" else 0) == len(pl.ps_sockets)

    def _prepare(self) -> None:
        """What the observations of a point share (skipped at points with no choice)."""
        view, n = self.view, self.n_dec
        assert view is not None
        self._jobs_m = self._job_matrix(view, n)
        self._jm = np.zeros(self.max_jobs, dtype=np.int8)
        self._jm[:n] = 1
        util = F.link_utilisation(view.perf, view, self.n_links)
        self._links_m = self._links_static.copy()
        if util is not None:
            self._links_m[: util.size, 2 + len(F.LINK_KINDS)] = util
        self._rows.point(view)
        self._rows_dirty = True
        # per job, as Python numbers (read once per choice)
        self._req_l = self._req_speed.tolist()
        self._rem_l, self._speed_l = view.remaining.tolist(), view.speed.tolist()
        self._bs_l = view.batch_sizes.tolist()
        # the statistical efficiency of the running async jobs at their placements (their
        # keep rows' progress), in one call of the performance model: one value per job
        jobs, pls = view.jobs, view.placements
        ks = [k for k in range(n) if pls[k] is not None and jobs[k].mode == "async" and self._speed_l[k] > 0]
        self._keep_eff: dict[int, float] = {}
        if ks:
            eff = view.perf.efficiency([jobs[k] for k in ks], [pls[k] for k in ks], view.batch_sizes[ks],
                                       np.zeros(len(ks)))
            self._keep_eff = dict(zip(ks, np.asarray(eff, dtype=float).tolist()))
        self._cluster_point = (
            float(np.log1p(view.time_s / F.HOUR)), len(view.jobs) / self.max_jobs,
            sum(p is None for p in view.placements) / self.max_jobs,
            float(np.count_nonzero(view.gpu_tasks == 0)) / self.topo.n_gpus,
        )
        self._prepared = True

    def observation(self, full: bool = True) -> dict[str, np.ndarray]:
        """The observation of the current choice (see ``features``).
        ``full=False``: only what changes from one choice to the next in an
        allocation phase (cluster, context, current job, candidates, mask),
        for a network that encodes the rest once per point."""
        view = self.view
        assert view is not None, "DecisionPoint: begin(view) first"
        if not self._prepared:
            self._prepare()
        board = self.board
        n, k = self.n_dec, self.k
        cur = self._one_hot[k if 0 <= k < n else -1].copy()  # one copy of a kept row
        obs = {"cluster": self._cluster_row(), "context": self._context_row(), "current_job": cur,
               "action_mask": self._mask.copy()}
        if self.agent_allocates:
            if self.phase == ALLOCATE and 0 <= k < n:
                obs["candidates"] = self._candidate_matrix()
            else:
                obs["candidates"] = np.zeros((self.n_cand, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
        if not full:
            return obs
        if self._rows_dirty:
            self._rows.rewrite(board, self.part)
            self._rows_dirty = False
        if self._links_version != board.version:
            self._links_m[: self.n_links, -1] = board.link_jobs / 4.0
            self._links_version = board.version
        jobs = self._jobs_m.copy()
        jobs[:, 2] = self._decided
        jobs[:, 3] = self._chosen / F.WORKER_SCALE
        if 0 <= k < n:
            jobs[k, 1] = 1.0
        obs.update({
            "jobs": jobs, "job_mask": self._jm.copy(), "gpus": self._rows.gpus.copy(), "gpu_mask": self._gm.copy(),
            "gpu_groups": self._gpu_groups.copy(), "sockets": self._rows.sockets.copy(),
            "socket_mask": self._sm.copy(), "links": self._links_m.copy(), "link_mask": self._lm.copy(),
        })
        return obs

    def _cluster_row(self) -> np.ndarray:
        board, n, k = self.board, self.n_dec, self.k
        if self._cluster_board[0] != board.version:
            topo, occ = self.topo, board.occ
            add = np.add.reduce  # ``ndarray.sum``'s reduction, without its Python wrapper
            self._cluster_board = (board.version, (
                board.free_slots() / topo.n_gpus,
                add(occ.cores_free) / self._cores_total,
                add(occ.mem_free) / self._mem_total,
            ))
        t_h, active, queued, idle = self._cluster_point
        free, cores, mem = self._cluster_board[1]
        if self._past[0] != self.decisions:  # the points decided so far, as a feature (once per point)
            self._past = (self.decisions, float(np.log1p(self.decisions)))
        past = self._past[1]
        return np.array([t_h, active, queued, free, idle, cores, mem, max(n - k, 0) / self.max_jobs, past],
                        dtype=np.float32)

    def _context_row(self) -> np.ndarray:
        part = self.part
        if part is None:  # an allocation choice: always the same row
            return self._ctx_alloc.copy()
        worker = part.placing_worker
        # phase (allocate, worker, PS), workers left, PSs left, tasks done: one array call per step
        return np.array([0.0, 1.0 if worker else 0.0, 0.0 if worker else 1.0,
                         (part.n_workers - len(part.gpus)) / F.WORKER_SCALE,
                         (part.n_ps - len(part.sockets)) / F.WORKER_SCALE,
                         (len(part.gpus) + len(part.sockets)) / max(part.n_workers + part.n_ps, 1)], dtype=np.float32)

    def allocation_rows(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """An allocation choice as a level-1 scorer reads it, without
        building what it does not read: (the current job's index, the cluster
        row, the context row, the candidate rows of the valid slots in
        ``_candidate_rows``'s two parts ``base`` and ``dyn``, the valid
        actions' indices); the same values as ``observation(full=False)``. A scorer that keeps what it computes of ``base``
        (the same object again while the key is unchanged) redoes per choice
        only the columns ``DYN_COLUMNS``. Only in an allocation phase."""
        assert self.view is not None and self.agent_allocates and self.phase == ALLOCATE and 0 <= self.k < self.n_dec
        if not self._prepared:
            self._prepare()
        base, dyn, ix = self._candidate_rows()
        return self.k, self._cluster_row(), self._context_row(), base, dyn, ix

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
        return Decision(placements=dict(self.placements), arch=self.arch, mode=self.mode, recheck_s=recheck)

    # ------------------------------------------------------------ internals
    def _effective(self, k: int, arch: str | None, mode: str | None) -> Job:
        """Job ``k`` with ``arch``/``mode`` where it leaves them open (made once per episode)."""
        return self._effective_of(self.view.jobs[k], arch, mode)  # type: ignore[union-attr]

    def _effective_of(self, cur: Job, arch: str | None, mode: str | None) -> Job:
        base = self.base_jobs[cur.job_id]
        a = arch if arch is not None and base.arch_open else cur.arch
        m = mode if mode is not None and base.mode_open else cur.mode
        if (a, m) == (cur.arch, cur.mode):
            return cur
        key = (cur.job_id, a, m)
        job = self._variants.get(key)
        if job is None:
            job = self._variants[key] = effective_job(base, a, m)
        return job

    def _slot_job(self, k: int, c: int) -> Job:
        t = self.table
        return self._effective(k, ARCHS[t.arch[c]], MODES[t.mode[c]])

    def _next_choice(self) -> bool:
        """Move to the next job that needs the agent; False when the point is done."""
        view = self.view
        assert view is not None
        if self.agent_allocates:
            decided, n = self._decided, self.n_dec
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
                    self._rows_dirty = True
                if self.skip_forced:
                    if self._forced(k):
                        decided[k] = 1.0
                        continue
                self._cand_mask(k)
                if not self.skip_forced or len(self._valid_set[0]) > 1:  # more than wait
                    return True
                decided[k] = 1.0
        while self.queue:
            k, al = self.queue.pop(0)
            self.k = k
            job = self._effective(k, al.arch, al.mode)
            if not self._placeable(job, al.workers, al.ps):
                continue  # cannot be placed now: it waits
            self._begin_place(job, al.workers, al.ps)
            return True
        return False

    def _forced(self, k: int) -> bool:
        """Job ``k`` surely has no choice but to wait: no room for its
        smallest worker count, and it cannot keep its placement."""
        job = self.view.jobs[k]  # type: ignore[union-attr]
        if self.feas.worker_room(self.board, job) >= self._min_workers:
            return False
        pl = self.view.placements[k]  # type: ignore[union-attr]
        return pl is None or not self.board.fits(job, pl)

    def _placeable(self, job: Job, w: int, p: int) -> bool:
        ok, ask = self.feas.sure_one(self.board, job, w, p)
        if ok:
            return True
        return ask and self.feas.place(self.view, self.board, job, w, p) is not None  # type: ignore[arg-type]

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
    def _slots(self, cur: Job, base: Job) -> np.ndarray:
        """The menu's slots open to a job (its architecture and mode, or any where open)."""
        key = (cur.arch, cur.mode, base.arch_open, base.mode_open)
        v = self._slot_sets.get(key)
        if v is None:
            t = self.table
            v = self._slot_sets[key] = np.flatnonzero(
                (t.workers > 0) & ~t.duplicate
                & ((t.arch == ARCHS.index(cur.arch)) | base.arch_open)
                & ((t.mode == MODES.index(cur.mode)) | base.mode_open)
            )
        return v

    def _slots_with_ps(self, menu: tuple) -> bool:
        """Whether any slot open to a job of ``menu`` (arch, mode, arch open, mode open) has a PS."""
        v = self._menu_ps.get(menu)
        if v is None:
            arch, mode, arch_open, mode_open = menu
            t = self.table
            slots = np.flatnonzero((t.workers > 0) & ~t.duplicate & ((t.arch == ARCHS.index(arch)) | arch_open)
                                   & ((t.mode == MODES.index(mode)) | mode_open))
            v = self._menu_ps[menu] = bool(np.any(t.ps[slots] > 0))
        return v

    def _cand_mask(self, k: int) -> None:
        """Mask of the candidates of job ``k``."""
        view, t, board, feas = self.view, self.table, self.board, self.feas
        assert view is not None
        cur = view.jobs[k]
        base = self.base_jobs[cur.job_id]
        cur_pl = view.placements[k]
        keep = cur_pl is not None and board.fits(cur, cur_pl)
        # The slots the rules decide depend on the job's menu, the room and the PS room only
        # (not on the PS room where the menu's open slots have no PS).
        room = feas.worker_room(board, cur)  # workers use the same resources in every variant
        menu = (cur.arch, cur.mode, base.arch_open, base.mode_open)
        # The rules compare the room with each slot's workers, and the PS room left with each
        # slot's PSs: beyond the menu's largest need, more room decides the same, so the key
        # holds the room up to that need (more choices find their rules already made).
        most = self._menu_most.get(menu)
        if most is None:
            slots = self._slots(cur, base)
            most = self._menu_most[menu] = int(t.workers[slots].max()) if slots.size else 0
        room = min(room, most)
        if feas.fill and self._slots_with_ps(menu):
            total, per = feas.ps_room(board, cur)
            need = self._ps_most.get((menu, per))
            if need is None:  # integers (``per`` is): exact
                slots = self._slots(cur, base)
                need = self._ps_most[(menu, per)] = float(np.max(t.ps[slots] + per * t.workers[slots])) \
                    if slots.size else 0.0
            key = (*menu, room, min(total, need), per)
        else:
            key = (*menu, room)
        v = self._slot_rules.get(key)
        if v is None:
            slots = self._slots(cur, base)
            ok, ask = feas.sure_with(t.workers[slots], t.ps[slots], room, *(key[5:] if len(key) > 5 else (0.0, 0.0)))
            sure = np.zeros(t.size, dtype=bool)  # wait, and the slots the rules allow (keep apart)
            sure[WAIT] = True
            sure[slots[ok]] = True
            kept = sure.copy()
            kept[KEEP] = True
            sure.flags.writeable = kept.flags.writeable = False  # shared by the choices they decide
            v = self._slot_rules[key] = (sure, kept, slots[ask].tolist(), sure.tobytes(), kept.tobytes())
        if not v[2] and view.perf.prices_everything:  # the rules decide every slot
            valid, vk = (v[1], v[4]) if keep else (v[0], v[3])
        else:
            valid = (v[1] if keep else v[0]).copy()
            for c in v[2]:
                job = self._slot_job(k, c)
                valid[c] = feas.place(view, board, job, int(t.workers[c]), int(t.ps[c])) is not None
            if not view.perf.prices_everything:  # slots the predictor cannot price cannot run either
                valid[2:] &= self._slot_speeds(k, valid)[2:] > 0
            vk = valid.tobytes()
        self._valid, self._vk = valid, vk
        vs = self._valid_sets.get(vk)
        if vs is None:  # the valid slots (list, index array) and their static rows
            ix = np.flatnonzero(valid)
            st = self._cand_static[ix]
            st[:, 0] = 1.0
            m = np.zeros(self.n_actions, dtype=np.int8)
            m[: t.size] = valid
            vs = self._valid_sets[vk] = (ix.tolist(), ix, st, m)
        self._valid_set = vs
        self._mask = vs[3].copy()

    def _choose_candidate(self, c: int) -> None:
        view, k, t = self.view, self.k, self.table
        assert view is not None
        self._decided[k] = 1.0
        if c == WAIT:
            return
        cur_pl = view.placements[k]
        if c == KEEP:
            assert cur_pl is not None
            self._chosen[k] = cur_pl.n_workers
            self._commit(k, view.jobs[k], cur_pl)
            return
        job = self._slot_job(k, c)
        w, p = int(t.workers[c]), int(t.ps[c])
        self._chosen[k] = w
        if self.agent_places:
            self._begin_place(job, w, p)
            return
        if cur_pl is not None and job is view.jobs[k] and cur_pl.n_workers == w and cur_pl.n_ps == p \
                and self.board.fits(job, cur_pl):
            pl: Placement | None = cur_pl  # the same allocation: stay in place, no restart
        else:
            pl = self.feas.place(view, self.board, job, w, p)
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
        self._rows_dirty = True

    # --------------------------------------------------------- placement
    def _begin_place(self, job: Job, w: int, p: int) -> None:
        self.phase = PLACE
        self.part = PartialPlacement(self.board, job, w, p)  # the rows do not change: no task of it yet
        self._place_mask()

    def _place_mask(self) -> None:
        part = self.part
        assert part is not None
        m = np.zeros(self.n_actions, dtype=np.int8)
        G, S = self.topo.n_gpus, self.topo.n_sockets
        o = self.place_off
        if part.placing_worker:
            m[o:o + G] = part.gpu_mask()
        else:
            m[o + self.max_gpus:o + self.max_gpus + S] = part.socket_mask()
        if not np.count_nonzero(m):
            m[self.defer_action] = 1  # a dead end: the job waits
        self._mask = m

    def _place_task(self, a: int) -> None:
        part = self.part
        assert part is not None
        k = self.k
        if a == self.defer_action:
            self.part = None
            self._decided[k] = 1.0
            self._chosen[k] = 0.0
            self._rows_dirty = True
            return
        o = self.place_off
        worker = part.placing_worker
        if worker:
            part.place_worker(a - o)
            if not self._rows_dirty:
                self._rows.worker(part, a - o)
        else:
            part.place_ps(a - o - self.max_gpus)
            if not self._rows_dirty:
                self._rows.ps(part, a - o - self.max_gpus)
        if part.complete:
            self.part = None
            self._commit(k, part.job, part.placement())
            self._decided[k] = 1.0
            self._chosen[k] = part.n_workers
            return
        if worker and part.placing_worker:  # the next worker: the last mask, narrowed where this one went
            m = self._mask.copy()
            part.narrow_gpu_mask(m[o:o + self.topo.n_gpus], a - o)
            if not np.count_nonzero(m):
                m[self.defer_action] = 1  # a dead end: the job waits
            self._mask = m
        else:
            self._place_mask()

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

    # ------------------------------------------------------- observation
    def _speed(self, job: Job, w: int, p: int, bs: int) -> float:
        v = self._speed_cache.get((self._who(job), job.arch, job.mode, bs, w, p))
        return v if v is not None else self._speeds([(job, w, p, bs)])[0]

    def _who(self, job: Job) -> int | str:
        """Whose predictions a speed cache key names: the job's model where
        the predictor's speeds depend on a job only through its model (jobs
        of one model share them: a point where hundreds of jobs are new
        prices each model once), else the job itself."""
        return job.model if self.view.perf.per_model else job.job_id  # type: ignore[union-attr]

    def _speeds(self, items: Sequence[tuple[Job, int, int, int]]) -> list[float]:
        """Predicted progress rate alone (samples/s, times the statistical
        efficiency of an asynchronous job) of each (job, workers, PSs, batch
        size) on a consolidated placement; the uncached ones in one
        vectorised call of the performance model."""
        perf = self.view.perf  # type: ignore[union-attr]
        cache = self._speed_cache
        who = self._who
        out: list[float] = []
        miss: dict[tuple, list[int]] = {}
        for i, (job, w, p, bs) in enumerate(items):
            key = (who(job), job.arch, job.mode, bs, w, p)
            v = cache.get(key)
            if v is None:
                if w < 1:
                    v = cache[key] = 0.0
                else:
                    miss.setdefault(key, []).append(i)
            out.append(0.0 if v is None else v)
        if miss:
            first = [items[ix[0]] for ix in miss.values()]
            jobs = [j for j, _, _, _ in first]
            pls = [perf.compact_placement(w, p if j.arch == "ps" else 0) for j, w, p, _ in first]
            bs = np.array([b for _, _, _, b in first], dtype=np.int64)
            try:
                sp = perf.alone_speeds(jobs, pls, bs)
            except ValueError:  # a measured backend has no data for some: 0, and their slots are masked
                sp = np.array([perf.alone_speed_or_zero(j, pl, int(b)) for j, pl, b in zip(jobs, pls, bs.tolist())])
            if any(j.mode == "async" for j in jobs):  # progress, not samples: stale gradients are worth less
                sp = sp * perf.efficiency(jobs, pls, bs, np.zeros(len(jobs)))
            for (key, ix), v in zip(miss.items(), sp.tolist()):
                cache[key] = v
                for i in ix:
                    out[i] = v
        return out

    def _job_facts(self, job: Job, key: tuple, req: float, more: float, now: float) -> tuple[float, ...]:
        """What the job matrix needs of a job that does not move while its
        allocation stays (``key``: job, architecture, mode, batch size,
        workers, PSs): its workers and PSs; its predicted speeds alone at its
        request, with one more worker and at its current allocation (given);
        its profile, choices and arrival time."""
        _, _, _, _, w0, p0 = key
        prof, base = self.profiles[job.model], self.base_jobs[job.job_id]
        v = self._facts[key] = (
            w0, p0, req, more, now,
            prof.params_mb / 1000.0, prof.sample_time_s * 1000.0, job.requested_gpus / F.WORKER_SCALE,
            job.arch == "ps", job.mode == "async", base.arch_open, base.mode_open, job.arrival_s,
        )
        return v

    def _job_matrix(self, view: ClusterView, n: int) -> np.ndarray:
        out = np.zeros((self.max_jobs, len(F.JOB_FEATURES)), dtype=np.float32)
        if n == 0:
            self._req_speed = np.zeros(0)
            return out
        get = self._facts.get
        rows: list = []
        miss = []  # (row, job, key) of the facts not kept yet
        for j, pl, b in zip(view.jobs[:n], view.placements[:n], view.batch_sizes[:n].tolist()):
            key = (j.job_id, j.arch, j.mode, b, 0, 0) if pl is None else \
                (j.job_id, j.arch, j.mode, b, len(pl.gpus), len(pl.ps_sockets))
            r = get(key)
            if r is None:
                miss.append((len(rows), j, key))
            rows.append(r)
        if miss:
            need = []  # the speeds the missing facts need, in one call: at the request, now, one more worker
            for _, j, (_, _, _, b, w0, p0) in miss:
                p1 = max(p0, 1) if j.arch == "ps" else 0
                need += [(j, j.requested_gpus, j.num_ps_requested, b), (j, w0, p1, b)]
                if w0 + 1 <= self.topo.n_gpus:
                    need.append((j, w0 + 1, p1, b))
            sp = self._speeds(need)
            at = 0
            for i, j, key in miss:
                more = key[4] + 1 <= self.topo.n_gpus
                rows[i] = self._job_facts(j, key, sp[at], sp[at + 2] if more else 0.0, sp[at + 1])
                at += 3 if more else 2
        facts = np.fromiter(itertools.chain.from_iterable(rows), dtype=float, count=13 * n).reshape(n, 13)
        cw = facts[:, 0]
        req = np.maximum(facts[:, 2], 1e-12)
        prog, rem = view.progress[:n], view.remaining[:n]
        o = out[:n]
        o[:, 0] = 1.0
        o[:, 4] = cw > 0
        o[:, 5:7] = facts[:, :2] / F.WORKER_SCALE  # workers, PSs
        o[:, 7] = np.log1p((view.time_s - facts[:, 12]) / F.HOUR)
        o[:, 8] = prog / np.maximum(prog + rem, 1e-12)
        o[:, 9] = np.log1p(rem / req / F.HOUR)
        o[:, 10] = view.speed[:n] / req
        o[:, 11] = (facts[:, 3] - facts[:, 4]) / req
        o[:, 12:19] = facts[:, 5:12]
        o[:, 19] = np.log1p(view.restarts[:n])
        o[:, 20] = np.log1p(view.attained_gpu_s[:n] / F.HOUR)
        if self._hints:
            hw = self._hints
            o[:, 21] = [(hw[j.job_id].workers if j.job_id in hw else 0) / F.WORKER_SCALE for j in view.jobs[:n]]
        self._req_speed = req
        np.clip(o, -F.BIG, F.BIG, out=o)  # (the padding rows are zero)
        return out

    def _slot_speed_vector(self, k: int, slots: np.ndarray) -> np.ndarray:
        """Predicted speed alone of job ``k`` at every menu slot (wait and keep:
        0), one vector per job and batch size kept for the episode; the
        ``slots`` not priced yet are priced now, in one call."""
        view, t = self.view, self.table
        assert view is not None
        who, bs = self._who(view.jobs[k]), int(view.batch_sizes[k])
        vec = self._slot_speed.get((who, bs))
        if vec is None:
            vec = self._slot_speed[(who, bs)] = np.full(t.size, np.nan)
            vec[:2] = 0.0  # wait, keep: set apart
        sub = vec[slots]
        new = slots[sub != sub].tolist()  # NaN: slots asked for the first time
        if new:
            vec[new] = self._speeds([(self._slot_job(k, c), int(t.workers[c]), int(t.ps[c]), bs) for c in new])
        return vec

    def _price_menus(self, view: ClusterView) -> None:
        """Price the whole menu of each (model, batch size) seen for the first
        time at this point, in one call of the performance model: a
        vectorised solve costs a fraction per allocation of one solve per
        call, and the heuristic hint (which asks for these consolidated
        allocations one by one) then finds most of them priced. Only where
        jobs of one model share their speeds (``per_model``) and the predictor
        prices every allocation; elsewhere slots are priced as they are asked
        for (``_slot_speed_vector``). The same speeds either way."""
        perf, t = view.perf, self.table
        if not (perf.per_model and perf.prices_everything):
            return
        vectors = self._slot_speed
        items: list[tuple[Job, int, int, int]] = []
        where: list[tuple[np.ndarray, int]] = []
        new: dict[tuple[str, int], set[int]] = {}  # the pairs new here: the slots asked for so far
        for cur, bs in zip(view.jobs, view.batch_sizes.tolist()):
            key = (cur.model, bs)
            asked = new.get(key)
            if asked is None:
                if key in vectors:
                    continue
                asked = new[key] = set()
                vec = vectors[key] = np.full(t.size, np.nan)
                vec[:2] = 0.0  # wait, keep: set apart
            else:
                vec = vectors[key]
            for c in self._slots(cur, self.base_jobs[cur.job_id]).tolist():  # its menu (jobs of a model may differ)
                if c not in asked:
                    asked.add(c)
                    items.append((self._effective_of(cur, ARCHS[t.arch[c]], MODES[t.mode[c]]), int(t.workers[c]),
                                  int(t.ps[c]), bs))
                    where.append((vec, c))
        if items:
            for (vec, c), v in zip(where, self._speeds(items)):
                vec[c] = v

    def _slot_speeds(self, k: int, valid: np.ndarray) -> np.ndarray:
        """``_slot_speed_vector`` on the ``valid`` slots (bool), 0 elsewhere."""
        return np.where(valid, self._slot_speed_vector(k, np.flatnonzero(valid)), 0.0)

    def _candidate_matrix(self) -> np.ndarray:
        """The candidate rows of the current job (``t.size`` rows); only the
        valid slots are computed (``_candidate_rows``), the others stay zero."""
        base, dyn, ix = self._candidate_rows()
        # ``base`` spread over the menu's rows, kept per ``base`` (the same object while its key
        # holds), and where ``dyn`` goes in it as flat indices: a copy and one ``put`` per choice
        e = self._cand_full.get(id(base))
        if e is None or e[0] is not base:  # holds ``base``: its id is not reused while here
            if len(self._cand_full) > 4096:
                self._cand_full.clear()
            full = np.zeros((self.table.size, base.shape[1]), dtype=np.float32)
            full[ix] = base
            flat = (ix[:, None] * base.shape[1] + np.array(DYN_COLUMNS)).ravel()
            e = self._cand_full[id(base)] = (base, full, flat)
        out = e[1].copy()
        np.put(out, e[2], dyn)  # ``dyn``'s rows in C order, as ``flat``
        return out

    def _candidate_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The current job's candidate rows on its valid slots ``ix`` (index
        array, ascending) in two parts: ``base``, the rows with the columns
        ``DYN_COLUMNS`` zero, which depends only on the valid slots, the job's
        current allocation and restart delay (one array per such key, kept:
        the same object again; read-only), and ``dyn`` (float32, one row per
        valid slot), those columns (speed over the request, hours to finish,
        servers spanned, share of the free GPUs, hint) for this choice. The
        rows are ``base`` with ``dyn`` written into ``DYN_COLUMNS``; both are
        clipped at ``F.BIG`` (each part where it is made: a float32 rounding
        and the clip commute)."""
        t, view, k = self.table, self.view, self.k
        assert view is not None
        valid = self._valid
        idx, ix, static, _ = self._valid_set
        cur = view.jobs[k]
        cur_pl = view.placements[k]
        prof = self.profiles[cur.model]
        now = None if cur_pl is None else (cur_pl.n_workers, cur_pl.n_ps, cur.arch == "ps", cur.mode == "async")
        bkey = (self._vk, now, prof.restart_s)
        base = self._cand_base.get(bkey)
        if base is None:
            base = static.copy()  # valid, wait, keep, workers, PSs, arch, mode of the menu
            if valid[KEEP]:  # the second row
                assert now is not None
                base[1, 3:7] = (now[0] / F.WORKER_SCALE, now[1] / F.WORKER_SCALE, now[2], now[3])
            base[:, 9] = self._restarts(cur, cur_pl)[ix]
            base[:, 13] = base[:, 9] * (prof.restart_s / F.RESTART_SCALE)
            np.minimum(base, F.BIG, out=base)
            base.flags.writeable = False
            if len(self._cand_base) > 4096:
                self._cand_base.clear()
            self._cand_base[bkey] = base
        req = max(self._req_l[k], 1e-12)
        rate, safe, pos = self._valid_slot_terms(k, ix, req)
        free = max(self.board.free_slots(), 1)
        # servers spanned (/ 4) and share of the free GPUs on the valid slots, kept per
        # (servers array, valid slots) and (free GPUs, valid slots)
        skey = (self.board.version, cur.model)
        servers = self._servers.get(skey)
        if servers is None:
            servers = self.feas.servers(self.board, cur, t.workers)
            if servers is not None:
                if len(self._servers) > 64:
                    self._servers.clear()
                self._servers[skey] = servers
        if servers is None:
            spanned = np.zeros(len(idx))
            for i, c in enumerate(idx):
                if c > KEEP:
                    pl = self.feas.place(view, self.board, self._slot_job(k, c), int(t.workers[c]), int(t.ps[c]))
                    assert pl is not None
                    spanned[i] = min(self._index.spanned(pl) / 4.0, F.BIG)
        else:
            e = self._spanned.get((id(servers), self._vk))
            if e is None or e[0] is not servers:  # holds the array: its id is not reused while here
                if len(self._spanned) > 4096:
                    self._spanned.clear()
                sp = np.minimum(servers[ix] / 4.0, F.BIG)
                sp[0] = 0.0  # wait (always valid: the first row)
                e = self._spanned[(id(servers), self._vk)] = (servers, sp)
            spanned = e[1]
        share = self._share.get((free, self._vk))
        if share is None:
            if len(self._share) > 4096:
                self._share.clear()
            share = self._share[(free, self._vk)] = np.minimum(self._tw[ix] / free, F.BIG)
        # speed over the request, hours to finish (0 where no speed), servers, share, hint:
        # the same IEEE operations per element as one by one
        rem = self._rem_l[k]
        hours = rem / safe
        hours /= F.HOUR
        np.log1p(hours, out=hours)
        hours *= pos
        if not rem < 1e290:  # only then can the log of a finite quotient exceed BIG (about 710 at most)
            np.minimum(hours, F.BIG, out=hours)
        zero = self._zeros.get(len(idx))
        if zero is None:
            zero = self._zeros[len(idx)] = np.zeros(len(idx))
            zero.flags.writeable = False
        # made column by column in one call (its transpose: the rows, as a view)
        dyn = np.array((rate, hours, spanned, share, zero), dtype=np.float32).T
        if valid[KEEP]:  # the second row: the job's own allocation
            assert cur_pl is not None
            cw = cur_pl.n_workers
            x = self._speed_l[k]
            if x > 0:
                if cur.mode == "async":  # measured samples/s: as progress, like the other slots
                    x *= self._keep_eff[k]
            else:
                x = self._speed(cur, cw, cur_pl.n_ps, self._bs_l[k])
            big = F.BIG
            dyn[1, :4] = (min(x / req, big), min(math.log1p(rem / max(x, 1e-12) / F.HOUR), big) if x > 0 else 0.0,
                          min(self._index.spanned(cur_pl) / 4.0, big), min(cw / free, big))
        al = self._hints.get(cur.job_id)
        hint = -1
        if al is not None:
            arch = al.arch if al.arch is not None and self.base_jobs[cur.job_id].arch_open else cur.arch
            mode = al.mode if al.mode is not None and self.base_jobs[cur.job_id].mode_open else cur.mode
            ps = max(al.ps, 1) if arch == "ps" else 0
            keep = cur_pl is not None and (arch, mode) == (cur.arch, cur.mode) and cur_pl.n_workers == al.workers \
                and cur_pl.n_ps == ps
            nkey = (self._vk, al.workers, ps, arch, mode, keep)
            hint = self._nearest.get(nkey, -1)
            if hint < 0:
                if len(self._nearest) > 4096:
                    self._nearest.clear()
                hint = self._nearest[nkey] = nearest_slot(t, valid, al.workers, ps, ARCHS.index(arch),
                                                          MODES.index(mode), keep)
        elif self.hint_policy is not None:
            hint = WAIT
        if hint >= 0:  # a valid slot (wait, keep or a valid candidate): its row
            dyn[bisect.bisect_left(idx, hint), 4] = 1.0
        return base, dyn, ix

    def _valid_slot_terms(self, k: int, ix: np.ndarray, req: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``_slot_speed_vector`` on the valid slots ``ix`` (wait and keep 0) as
        the candidate rows use it: (speeds over ``req``, speeds at least
        1e-12 where positive, 1 where a speed is positive else 0), read-only. Once priced, a
        slot's speed never changes, so they are kept per job (or model,
        ``_who``), batch size, valid slots and the request's speed."""
        view = self.view
        assert view is not None
        key = (self._who(view.jobs[k]), self._bs_l[k], self._vk, req)
        v = self._valid_speeds.get(key)
        if v is None or v[0] != req:
            sv = self._slot_speed_vector(k, ix)[ix]
            pos = sv > 0  # (where not, any finite divisor: its hours are multiplied by 0)
            v = (req, np.minimum(sv / req, F.BIG), np.where(pos, np.maximum(sv, 1e-12), 1.0), pos.astype(float))
            for a in v[1:]:
                a.flags.writeable = False
            self._valid_speeds[key] = v
        return v[1], v[2], v[3]

    def _restarts(self, cur: Job, cur_pl: Placement | None) -> np.ndarray:
        """Which slots would restart the job (wait: preempt a running job; keep: never)."""
        if cur_pl is None:
            return self._no_restart
        key = (cur_pl.n_workers, cur_pl.n_ps, cur.arch == "ps", cur.mode == "async")
        v = self._restart_sets.get(key)
        if v is None:
            cw, cp, ca, cm = key
            v = ((self._tw != cw) | (self._tp != cp) | (self._ta != ca) | (self._tm != cm)).astype(float)
            v[WAIT], v[KEEP] = 1.0, 0.0
            v = self._restart_sets[key] = v
        return v
