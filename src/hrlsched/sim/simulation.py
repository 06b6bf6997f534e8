"""The steppable engine: ``Simulation.reset`` and ``Simulation.step``.

Time runs in rounds of ``round_s``. At a *decision point* the engine hands a
``ClusterView`` out and waits; ``step(decision)`` checks the decision
(``sim.validation``), applies it (a running job whose placement, batch size,
architecture or mode changed pays its restart delay; a job left out is
preempted and keeps its progress), asks the performance model for the speeds
of all running jobs if anything changed, and advances round by round to the
next decision point; a job that finishes inside a round finishes at its exact
time. Jobs are admitted at the first round boundary at or after their arrival.

Decision points (``EngineConfig.decision_points``):

- ``"round"``: every round with an active job.
- ``"events"``: only at rounds where a job arrived or finished since the last
  decision, or at the first round at or after the last decision's
  ``recheck_s`` (the engine then jumps over the rounds in between in one go,
  which gives the same result as asking every round a scheduler whose
  decision only changes at those points).
- ``"every"``: at rounds whose index is a multiple of ``decision_every``
  (a scheduling interval, e.g. DL2's 20 minutes); arrivals wait for it.

Rounds with no active job are skipped (the clock jumps to the next arrival).
All state of an episode is in one ``SimState`` (``sim.state``); ``reset``
starts a fresh one, so that a seed gives the same episode every time.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, DecisionPoints, effective_job
from hrlsched.core.catalogue import ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel
from hrlsched.sim.predictor import NoisyPredictor, lognormal_factors
from hrlsched.sim.result import SimResult
from hrlsched.sim.state import HELD_ROWS, SimState
from hrlsched.sim.validation import Resources, add_tasks, check_decision, decision_loads, loads

EPS = 1e-9
_NEVER = 1 << 40
_SPEED_NOISE_STREAM = 0x5BEED  # random streams of the predictor's errors, apart from the workload's
_WORK_NOISE_STREAM = 0x3A11


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings. ``decision_points`` None: the scheduler's own
    (``Scheduler.points()``; ``"round"`` for a bare ``Simulation``).
    ``predictor_noise``/``work_noise``: sigma of the per-job log-normal error
    of predicted speeds / predicted total work (``sim.predictor``); 0: exact."""

    round_s: float = 60.0
    max_time_s: float = 90 * 86400.0
    restart_s: float | None = None  # None: each model's own checkpoint-restart delay
    restart_on_first_start: bool = True  # the first start also pays the delay (launch)
    decision_points: DecisionPoints | None = None
    decision_every: int = 1  # rounds between decision points, for "every"
    predictor_noise: float = 0.0
    work_noise: float = 0.0
    restart_scale: float = 1.0  # factor on every restart (and launch) delay
    max_restarts: int | None = None  # most restarts per job (``Simulation._hold_capped``); None: no cap

    def __post_init__(self) -> None:
        if self.decision_points not in (None, "round", "events", "every"):
            raise ValueError(
                f"decision_points: expected 'round', 'events' or 'every', got {self.decision_points!r}"
            )
        if int(self.decision_every) < 1:
            raise ValueError(f"decision_every: expected a positive number of rounds, got {self.decision_every}")
        if self.predictor_noise < 0 or self.work_noise < 0:
            raise ValueError("predictor_noise, work_noise: expected >= 0")
        if not self.restart_scale >= 0:
            raise ValueError(f"restart_scale: expected a factor >= 0, got {self.restart_scale}")
        if self.max_restarts is not None and (isinstance(self.max_restarts, bool) or int(self.max_restarts) != self.max_restarts
                                              or self.max_restarts < 0):
            raise ValueError(f"max_restarts: expected a whole number >= 0 or None, got {self.max_restarts!r}")


@dataclass
class StepResult:
    """What one ``step`` did. ``view`` is the next decision point's (None when
    ``done``). ``job_seconds``: the sum, over jobs in the system, of their time
    in the system during the step (a job counts from its arrival, even before
    the round boundary that admits it, until its exact finish); the first step
    also carries the time jobs spent in the system before the first decision
    point, so that its sum over an episode where all jobs finish is their total
    JCT. ``restarts``: jobs the decision restarted (``restarts`` counter + 1)."""

    view: ClusterView | None
    done: bool
    time_s: float
    elapsed_s: float
    arrivals: list[int] = field(default_factory=list)
    completions: list[int] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)
    job_seconds: float = 0.0
    rounds: int = 0


@dataclass(eq=False, slots=True)  # (not frozen: its __init__ and reads cost less; nothing writes to it)
class RunSet:
    """The running jobs (indices, in active order) and what ``_advance`` reads
    of them that changes only when the running set or its placements do: total
    work, their columns of ``SimState.per_held`` (and of ``SimState.held``, as
    indices into it flattened), their mean slowdown, the busy GPUs, and whether
    any of them is restarting (a delay is set only where a decision changes something; it
    then only shrinks). Kept in ``SimState.run_set`` until a decision changes
    something or a job finishes."""

    run: np.ndarray
    total: np.ndarray
    per_held: np.ndarray  # read-only use: ``_advance`` multiplies it into a new array
    held_flat: np.ndarray  # row r, job j -> r * n_jobs + j
    mean_slow: float
    busy: int
    delayed: bool


class Simulation:
    """A trace-driven cluster simulation stepped one decision at a time.

    ``predictor``: the model policies see as ``ClusterView.perf`` (None: the
    simulator's own ``perf``). ``oracle``: views carry the true model and the
    true remaining work whatever the predictor. ``max_tasks_per_gpu``: most
    workers a decision may put on one GPU.
    """

    def __init__(
        self,
        topology: Topology,
        jobs: Sequence[Job],
        perf: PerformanceModel,
        config: EngineConfig | None = None,
        catalogue: Mapping[str, ModelProfile] | None = None,
        max_tasks_per_gpu: int = 1,
        oracle: bool = False,
        predictor: PerformanceModel | None = None,
    ) -> None:
        self.topo = topology
        self.perf = perf
        self.cfg = config or EngineConfig()
        self.catalogue = dict(catalogue if catalogue is not None else perf.catalogue)
        self.max_tasks_per_gpu = int(max_tasks_per_gpu)
        self.oracle = bool(oracle)
        self.predictor = predictor
        self.points: DecisionPoints = self.cfg.decision_points or "round"
        self.every = int(self.cfg.decision_every) if self.points == "every" else 1
        order = sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival_s, jobs[i].job_id))
        self.jobs = [jobs[i] for i in order]
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("workload: job_id values must be unique")
        self.index = {jid: i for i, jid in enumerate(ids)}
        self._check_jobs()

        cfg, jobs_ = self.cfg, self.jobs
        profiles = [get_profile(j.model, self.catalogue) for j in jobs_]
        self.arrival = np.array([j.arrival_s for j in jobs_], dtype=float)
        self._arrival_l = self.arrival.tolist()  # the same, as Python floats: compared once or twice per step
        self.total = np.array([j.total_samples for j in jobs_], dtype=float)
        self.restart_cost = np.array(
            [p.restart_s if cfg.restart_s is None else cfg.restart_s for p in profiles], dtype=float
        )
        if cfg.restart_scale != 1.0:
            self.restart_cost *= cfg.restart_scale
        self.res = Resources(
            np.array([p.worker_cores for p in profiles]), np.array([p.worker_mem_gb for p in profiles]),
            np.array([p.ps_cores for p in profiles]), np.array([p.ps_mem_gb for p in profiles]),
        )
        # Whole numbers of cores and GiB (the built-in catalogue's), with sums far from 2**53:
        # every sum of them is exact whatever the order, so a finishing job's load can be
        # taken off on its own with the same result as recomputing the loads.
        figs = np.concatenate([self.res.w_cores, self.res.w_mem, self.res.p_cores, self.res.p_mem]).astype(float)
        self._whole_loads = bool(np.all(figs == np.round(figs)) and np.all(np.abs(figs) < 2.0**30))
        iso = np.array(
            [perf.isolated_speed(j, j.requested_gpus, j.num_ps_requested) for j in jobs_], dtype=float
        )
        self.isolated_duration_s = self.total / iso
        self.progress_dependent = bool(perf.progress_dependent)
        # Jobs with a chosen architecture/mode, made once: (index, arch, mode) -> Job.
        self._variants: dict[tuple[int, str, str], Job] = {}
        self._allowed_seen: set[tuple[str, int, object]] = set()  # arch/mode choices found allowed (static)
        self._seed = 0
        # Draws a whole workload of this episode's kind from a seed (the scenario's builder; None:
        # not known): the futures a lookahead that does not see the arrivals rolls out on.
        self.sample_jobs: Callable[[int], list[Job]] | None = None
        self._view_perf: PerformanceModel = perf
        self._state: SimState | None = None
        self._held_rows = np.arange(len(HELD_ROWS))[:, None] * len(jobs_)  # where each row of SimState.held starts

    def _check_jobs(self) -> None:
        g = self.topo.n_gpus
        for j in self.jobs:
            get_profile(j.model, self.catalogue)
            if j.requested_gpus > g:
                raise ValueError(
                    f"job {j.job_id} ({j.name}): requests {j.requested_gpus} GPUs, more than the "
                    f"cluster's {g}; cap or drop it when building the workload"
                )

    # ------------------------------------------------------------ public API
    @property
    def state(self) -> SimState:
        if self._state is None:
            raise RuntimeError("Simulation: call reset() first")
        return self._state

    def clone(self) -> Simulation:
        """This simulation at its current decision point, to be stepped on
        apart (a lookahead tries alternatives from one state): the state is
        ``SimState.clone``'s; the topology, the jobs, the performance model,
        the predictor and the engine's memos (job variants, choices found
        allowed) are pure functions of their keys and shared. Stepping the
        clone leaves this one unchanged, and the same decisions give it the
        same results."""
        new = copy.copy(self)
        new._state = self.state.clone()
        return new

    def with_future(self, future: Sequence[Job], seed: int = 0) -> Simulation:
        """This simulation at its current decision point, with the jobs not
        yet arrived replaced by ``future`` (jobs arriving after now, with ids
        unused here): the admitted jobs' state is copied, the new jobs start
        unarrived. A lookahead that does not know the arrivals rolls out on
        futures sampled so. ``seed`` draws the new jobs' predictor errors."""
        st = self.state
        k = st.next_arrival
        now = st.time_s
        late = [j for j in future if not j.arrival_s > now + EPS]
        if late:
            raise ValueError(f"with_future: job {late[0].job_id} arrives at {late[0].arrival_s} s, "
                             f"not after now ({now} s)")
        new = Simulation(self.topo, self.jobs[:k] + list(future), self.perf, self.cfg, self.catalogue,
                         self.max_tasks_per_gpu, self.oracle, self.predictor)
        new._seed = self._seed
        new.sample_jobs = self.sample_jobs
        new._variants = {key: j for key, j in self._variants.items() if key[0] < k}
        new._allowed_seen = set(self._allowed_seen)
        m = len(future)
        vp = self._view_perf
        if isinstance(vp, NoisyPredictor):
            f = lognormal_factors(self.cfg.predictor_noise, m, seed, _SPEED_NOISE_STREAM)
            vp = NoisyPredictor(vp.base, {**vp.factor, **{j.job_id: float(x) for j, x in zip(future, f)}})
        new._view_perf = vp
        old = st.clone()
        init = SimState.initial(new.jobs, self.topo.n_gpus, self.topo.n_servers)
        per_job = {"jobs", "placements", "held", "per_held"} | {
            f_.name for f_ in fields(SimState) if f_.name not in ("gpu_tasks", "cores_used", "mem_used", "work_factor")
            and isinstance(getattr(init, f_.name), np.ndarray)}
        for name in sorted(per_job):
            v, fresh = getattr(old, name), getattr(init, name)
            if isinstance(v, list):
                setattr(old, name, v[:k] + fresh[k:])
            else:
                fresh[..., :k] = v[..., :k]
                setattr(old, name, fresh)
        if st.work_factor is not None:
            wf = lognormal_factors(self.cfg.work_noise, m, seed, _WORK_NOISE_STREAM)
            old.work_factor = np.concatenate([st.work_factor[:k], wf])
        old.rebind()
        new._state = old
        return new

    @property
    def done(self) -> bool:
        st = self.state
        return not ((st.next_arrival < len(self.jobs) or st.active) and st.time_s < self.cfg.max_time_s)

    def reset(self, seed: int | None = None) -> ClusterView | None:
        """Start an episode: a fresh state, arrivals at t = 0 admitted (or the
        clock moved to the first arrival's round). Returns the first decision
        point's view; None only if there is none (no jobs, or no time).
        ``seed`` (default: the last one, 0 at first) draws the predictor's
        errors; the engine itself has no other randomness."""
        if seed is not None:
            self._seed = int(seed)
        n = len(self.jobs)
        st = SimState.initial(self.jobs, self.topo.n_gpus, self.topo.n_servers)
        base = self.predictor if self.predictor is not None else self.perf
        cfg = self.cfg
        if cfg.predictor_noise > 0:
            f = lognormal_factors(cfg.predictor_noise, n, self._seed, _SPEED_NOISE_STREAM)
            base = NoisyPredictor(base, {j.job_id: float(x) for j, x in zip(self.jobs, f)})
        self._view_perf = self.perf if self.oracle else base
        if cfg.work_noise > 0 and not self.oracle:
            st.work_factor = lognormal_factors(cfg.work_noise, n, self._seed, _WORK_NOISE_STREAM)
        self._state = st
        acc = StepResult(view=None, done=False, time_s=0.0, elapsed_s=0.0)
        view = self._to_decision_point(acc)
        st.pending_job_s = acc.job_seconds
        return view

    def step(self, decision: Decision) -> StepResult:
        """Apply ``decision`` at the current decision point and advance to the next."""
        st = self.state
        if self.done:
            raise RuntimeError("Simulation: the episode is over; call reset()")
        t0 = st.time_s
        out = StepResult(view=None, done=False, time_s=t0, elapsed_s=0.0, job_seconds=st.pending_job_s)
        st.pending_job_s = 0.0
        if self.cfg.max_restarts is not None:
            decision = self._hold_capped(decision)
        just_set = self._apply(decision, out.restarts)
        self._advance(just_set, out)
        out.view = self._to_decision_point(out)
        out.done = out.view is None
        out.time_s = st.time_s
        out.elapsed_s = st.time_s - t0
        return out

    def view(self) -> ClusterView:
        """The view of the current decision point (as ``reset``/``step`` returned it)."""
        return self._view()

    def result(self) -> SimResult:
        st = self.state
        rec = st.record
        T = float(self.cfg.round_s)
        ks = np.fromiter((r[1] for r in rec), dtype=np.int64, count=len(rec))

        def col(k: int, dtype: type) -> np.ndarray:
            return np.repeat(np.fromiter((r[k] for r in rec), dtype=dtype, count=len(rec)), ks)

        starts = np.cumsum(ks) - ks
        within = (np.arange(int(ks.sum())) - np.repeat(starts, ks)).astype(float)
        rounds = {
            "time_s": col(0, float) + T * within,
            "gpus_busy": col(2, np.int64),
            "jobs_queued": col(3, np.int64),
            "jobs_running": col(4, np.int64),
            "mean_slowdown": col(5, float),
        }
        return SimResult(
            jobs=self.jobs,
            start_s=st.start,
            finish_s=st.finish,
            restarts=st.restarts,
            gpu_seconds=st.gpu_s,
            hold_s=st.hold_s,
            worker_seconds=st.worker_s,
            ps_seconds=st.ps_s,
            slowdown_seconds=st.slow_s,
            productive_s=st.prod_s,
            progress=st.progress,
            contention_seconds=st.contention,
            isolated_duration_s=self.isolated_duration_s,
            rounds=rounds,
            n_gpus=self.topo.n_gpus,
            end_time_s=st.time_s,
            scheduler_calls=st.calls,
        )

    # ------------------------------------------------------------- internals
    def _act(self, st: SimState) -> np.ndarray:
        """``st.active`` as an index array (kept until a job arrives or finishes)."""
        act = st.act_idx
        if act is None:
            act = st.act_idx = np.fromiter(st.active, dtype=np.int64, count=len(st.active))  # (less overhead than np.array)
        return act

    def _run_set(self, st: SimState, act: np.ndarray) -> RunSet:
        rs = st.run_set
        if rs is None:
            run = act[st.n_workers[act] > 0]
            per_held = st.per_held.take(run, axis=1)  # (``take``: fancy indexing's values, with less overhead)
            slow = per_held[6]  # the slowdowns
            # ndarray.mean's arithmetic, without its overhead
            mean_slow = float(np.add.reduce(slow)) / slow.size if run.size else 1.0
            rs = st.run_set = RunSet(run, self.total[run], per_held, (self._held_rows + run).reshape(-1), mean_slow,
                                     int(np.count_nonzero(st.gpu_tasks)), bool(np.count_nonzero(st.delay_left[run])))
        return rs

    def _view(self) -> ClusterView:
        st = self.state
        act = self._act(st)
        progress = st.progress[act]  # gathered once, for the view and its remaining work
        if st.work_factor is None:
            remaining = self.total[act] - progress
        else:
            remaining = np.maximum(self.total[act] * st.work_factor[act] - progress, 0.0)
        return ClusterView(
            time_s=st.time_s,
            round_index=st.round_index,
            round_s=float(self.cfg.round_s),
            topology=self.topo,
            catalogue=self.catalogue,
            perf=self._view_perf,
            jobs=list(map(st.jobs.__getitem__, st.active)),  # (map: no Python frame per job)
            progress=progress,
            remaining=remaining,
            attained_gpu_s=st.attained[act],
            running_s=st.hold_s[act],
            restarts=st.restarts[act],
            speed=st.speed[act],
            batch_sizes=st.batch[act],
            placements=list(map(st.placements.__getitem__, st.active)),
            gpu_tasks=st.gpu_tasks.copy(),
            server_cores_used=st.cores_used.copy(),
            server_mem_used=st.mem_used.copy(),
        )

    def _is_decision_point(self, st: SimState) -> bool:
        if self.points == "round":
            return True
        if self.points == "events":
            return st.dirty or st.time_s >= st.recheck_s - EPS
        return st.round_index % self.every == 0

    def _to_decision_point(self, acc: StepResult) -> ClusterView | None:
        """Admit arrivals and advance until a decision point (its view) or the end (None)."""
        st, cfg = self.state, self.cfg
        T = float(cfg.round_s)
        n = len(self.jobs)
        arrival, arrival_l = self.arrival, self._arrival_l
        while True:
            while st.next_arrival < n and arrival_l[st.next_arrival] <= st.time_s + EPS:
                i = st.next_arrival
                st.active.append(i)
                st.act_idx = None
                st.is_active[i] = True
                st.next_arrival += 1
                st.dirty = True
                acc.arrivals.append(self.jobs[i].job_id)
                acc.job_seconds += st.time_s - arrival[i]  # in the system since its arrival
            if not ((st.next_arrival < n or st.active) and st.time_s < cfg.max_time_s):
                return None
            if not st.active:
                # Idle cluster: jump to the round of the next arrival.
                k = max(1, math.ceil((arrival_l[st.next_arrival] - st.time_s) / T - EPS))
                st.record.append((st.time_s, k, 0, 0, 0, 1.0))
                st.time_s += k * T
                st.round_index += k
                acc.rounds += k
                continue
            if self._is_decision_point(st):
                return self._view()
            self._advance(False, acc)

    def _job(self, i: int, arch: str, mode: str) -> Job:
        key = (i, arch, mode)
        j = self._variants.get(key)
        if j is None:
            j = self._variants[key] = effective_job(self.jobs[i], arch, mode)
        return j

    def _hold_capped(self, decision: Decision) -> Decision:
        """``decision`` where every running job that has had ``max_restarts``
        restarts keeps what it runs with (placement, batch size, architecture,
        mode): the cluster refuses to restart it again. Jobs the decision put
        where such a job stays wait instead, taken in this order until one does
        not fit: those kept where they ran (they ran beside it), then the
        others as the decision names them. A placement that is not one, or
        out of range, is left for ``check_decision`` to name."""
        if not isinstance(decision, Decision):
            return decision
        st, cap = self.state, self.cfg.max_restarts
        capped = [i for i in st.running if st.restarts[i] >= cap]  # type: ignore[operator]
        pinned = []
        def kept(jid: int) -> bool:  # the job runs and the decision leaves its placement as it is
            old = st.running.get(self.index.get(jid, -1))
            new = decision.placements.get(jid)
            return old is not None and (new is old or (isinstance(new, Placement) and new.canonical() == old))

        for i in capped:
            jid, cur = self.jobs[i].job_id, st.jobs[i]
            rebatch = decision.batch_sizes.get(jid, st.batch[i]) != st.batch[i]
            rechosen = decision.arch.get(jid, cur.arch) != cur.arch or decision.mode.get(jid, cur.mode) != cur.mode
            if not kept(jid) or rebatch or rechosen:
                pinned.append(i)
        if not pinned:
            return decision
        topo, held = self.topo, {self.jobs[i].job_id: st.running[i] for i in capped}
        tasks, cores, mem = np.zeros(topo.n_gpus, dtype=np.int64), np.zeros(topo.n_servers), np.zeros(topo.n_servers)
        for jid, pl in held.items():
            add_tasks(tasks, cores, mem, topo, self.res, self.index[jid], pl, 1)
        placements = dict(held)
        others = [jid for jid in decision.placements if jid not in held]
        # jobs kept where they ran first: they ran beside the held jobs
        others.sort(key=lambda jid: not kept(jid))
        for jid in others:
            pl, i = decision.placements[jid], self.index.get(jid)
            if i is None or not isinstance(pl, Placement) or not self._in_range(pl):
                placements[jid] = pl
                continue
            add_tasks(tasks, cores, mem, topo, self.res, i, pl, 1)
            servers = topo.gpu_server[list(pl.gpus)]
            if pl.ps_sockets:
                servers = np.concatenate([servers, topo.socket_server[list(pl.ps_sockets)]])
            if (tasks[list(pl.gpus)].max() > self.max_tasks_per_gpu or (cores[servers] > topo.server_cores[servers] + 1e-9).any()
                    or (mem[servers] > topo.server_mem_gb[servers] + 1e-9).any()):
                add_tasks(tasks, cores, mem, topo, self.res, i, pl, -1)  # it waits
                continue
            placements[jid] = pl
        return replace(
            decision, placements=placements,
            batch_sizes={j: b for j, b in decision.batch_sizes.items() if j in placements and j not in held},
            arch={j: a for j, a in decision.arch.items() if j not in held},
            mode={j: m for j, m in decision.mode.items() if j not in held},
        )

    def _in_range(self, pl: Placement) -> bool:
        t = self.topo
        return (bool(pl.gpus) and min(pl.gpus) >= 0 and max(pl.gpus) < t.n_gpus
                and (not pl.ps_sockets or (min(pl.ps_sockets) >= 0 and max(pl.ps_sockets) < t.n_sockets)))

    def _apply(self, decision: Decision, restarted: list[int]) -> bool:
        """Check and apply a decision; True if speeds were recomputed."""
        st, cfg = self.state, self.cfg
        new, new_loads, choices = check_decision(
            decision, st, self.topo, self.index, self.jobs, self.res, self.max_tasks_per_gpu, self._allowed_seen,
            self._whole_loads,
        )
        st.calls += 1
        st.dirty = False
        st.recheck_s = math.inf if decision.recheck_s is None else float(decision.recheck_s)
        if decision.arch or decision.mode:
            st.last_choices = (dict(decision.arch), dict(decision.mode), st.n_finished)
        running, placements = st.running, st.placements
        if new_loads is None and not choices and not decision.batch_sizes and len(new) == len(running):
            # Every running job keeps its placement (``new``: running ones only, as many), nothing
            # else changes (FIFO's decision where the queue's head does not fit): nothing to update.
            return False
        changed: list[int] = []
        for i in [i for i in running if i not in new]:  # preempted
            del running[i]
            placements[i] = None
            st.delay_left[i] = 0.0
            st.n_workers[i] = st.n_ps[i] = 0
            changed.append(i)
        for i, (a, m) in choices.items():
            st.jobs[i] = self._job(i, a, m)
        new_batch = {self.index[jid]: int(b) for jid, b in decision.batch_sizes.items()}
        for i, pl in new.items():
            old = running.get(i)
            nb = new_batch.get(i)
            rebatch = nb is not None and nb != st.batch[i]
            if rebatch:
                st.batch[i] = nb
            if old is not None and (old is pl or old == pl):
                if rebatch or i in choices:  # a new batch size, architecture or mode restarts the job too
                    st.delay_left[i] = self.restart_cost[i]
                    st.restarts[i] += 1
                    restarted.append(self.jobs[i].job_id)
                    changed.append(i)
                continue
            running[i] = placements[i] = pl
            st.n_workers[i], st.n_ps[i] = pl.n_workers, pl.n_ps
            st.per_held[2:5, i] = pl.n_workers
            st.per_held[5, i] = pl.n_ps
            if math.isnan(st.start[i]):  # (math: a numpy scalar call costs more)
                st.start[i] = st.time_s
                st.delay_left[i] = self.restart_cost[i] if cfg.restart_on_first_start else 0.0
            else:
                st.delay_left[i] = self.restart_cost[i]
                st.restarts[i] += 1
                restarted.append(self.jobs[i].job_id)
            changed.append(i)
        if not changed:
            return False
        if new_loads is None:  # only kept placements (some jobs preempted): loads of what is left
            new_loads = decision_loads(new, self.topo, self.res, self.max_tasks_per_gpu, st.jobs)
        st.gpu_tasks[:], st.cores_used[:], st.mem_used[:] = new_loads
        st.run_set = None
        st.rate[:] = 0.0
        st.speed[:] = 0.0
        if running:
            perf = self.perf
            keys = list(running)
            ri = np.array(keys, dtype=np.int64)
            pls = list(running.values())
            jobs = st.jobs
            rj = [jobs[i] for i in keys]  # Python ints index a list faster than numpy ones
            rb = st.batch[ri]
            # the jobs that moved: their speeds alone too (for the slowdown), in the same call
            changed_set = set(changed)
            moved = [k for k, i in enumerate(keys) if i in changed_set]
            sp, alone = perf.speeds_and_alone(rj, pls, rb, moved)
            if not (np.minimum.reduce(sp) > 0 and np.maximum.reduce(sp) < math.inf):  # NaN fails both (and propagates)
                bad = ri[int(np.flatnonzero(~(np.isfinite(sp) & (sp > 0)))[0])]
                raise RuntimeError(f"performance model gave a non-positive speed for job {self.jobs[bad].job_id}")
            st.speed[ri] = sp
            st.rate[ri] = sp * perf.efficiency(rj, pls, rb, st.progress[ri])
            if moved:
                st.alone[[keys[k] for k in moved]] = alone
            st.slowdown[ri] = np.maximum(st.alone[ri] / sp, 1.0)
        return True

    def _release(self, st: SimState, i: int, pl: Placement) -> None:
        """Take job ``i``'s tasks at ``pl`` off the GPU and server loads. Only
        where every CPU and memory figure is a whole number (``_whole_loads``):
        the sums are then exact in any order, the same as subtracting the
        job's ``loads`` at once."""
        add_tasks(st.gpu_tasks, st.cores_used, st.mem_used, self.topo, self.res, i, pl, -1)

    def _advance(self, just_set: bool, acc: StepResult) -> None:
        """Advance one round, or several when nothing can happen in between
        (not in ``"round"`` mode; where rates move with progress, not past
        the progress at which any running job's efficiency may next move)."""
        st, cfg = self.state, self.cfg
        T = float(cfg.round_s)
        n = len(self.jobs)
        act = self._act(st)
        rs = self._run_set(st, act)
        run = rs.run
        jump = self.points != "round"
        if self.progress_dependent and run.size and (jump or not just_set):
            # Statistical efficiency moves with progress (e.g. per epoch).
            rl = [st.jobs[i] for i in run]
            pls = [st.placements[i] for i in run]
            if not just_set:
                st.rate[run] = st.speed[run] * self.perf.efficiency(rl, pls, st.batch[run], st.progress[run])
            if jump:
                until = self.perf.efficiency_until(rl, pls, st.batch[run], st.progress[run])
        k = 1
        if run.size:
            # The running jobs' values, gathered once (fancy indexing costs more than the arithmetic).
            prog, rate = st.progress[run], st.rate[run]
            # No job restarting: the delays as the scalar 0.0 (the same values in every expression below).
            d = st.delay_left[run] if rs.delayed else 0.0
            fin_rel = (rs.total - prog) / rate
            if rs.delayed:  # (else 0.0 + fin_rel: the same values, none being -0.0 with rate > 0 and total >= prog)
                fin_rel = d + fin_rel
            first_fin = float(np.minimum.reduce(fin_rel))  # ``ndarray.min``'s reduction, without its wrapper
        if jump:
            t, na = st.time_s, st.next_arrival
            k_arr = math.ceil((self._arrival_l[na] - t) / T - EPS) if na < n else _NEVER
            k_fin = math.ceil(first_fin / T - EPS) if run.size else _NEVER
            k_max = math.ceil((cfg.max_time_s - t) / T - EPS)
            k_per = self.every - st.round_index % self.every if self.points == "every" else _NEVER
            k_re = math.ceil((st.recheck_s - t) / T - EPS) if st.recheck_s < math.inf else _NEVER
            k_eff = _NEVER
            if self.progress_dependent and run.size:
                # Rounds until a job's progress reaches the point where its efficiency may move: the
                # efficiency of a round is the one at its start, as round by round.
                t_eff = d + (until - prog) / rate
                k_eff = math.ceil(min(float(t_eff.min()) / T - EPS, _NEVER))
            k = max(1, min(k_arr, k_fin, k_max, k_per, k_re, k_eff))
        dt = k * T

        n_act = len(st.active)
        st.record.append((st.time_s, k, rs.busy, n_act - run.size, run.size, rs.mean_slow))

        # Advance running jobs by dt; those that finish stop at their exact time.
        st.contention[act] += n_act * dt  # corrected below for jobs that finish early
        acc.job_seconds += n_act * dt
        if run.size:
            any_fin = first_fin <= dt + EPS  # some fin_rel <= dt + EPS
            fin = fin_rel <= dt + EPS if any_fin else None
            # A job that does not finish holds the whole dt: min(fin_rel, dt) is dt for it (fin_rel >
            # dt + EPS; no NaN, or first_fin would be NaN). No job finishes: the scalar, the same values.
            held = np.minimum(fin_rel, dt) if any_fin else dt
            # (no finish and no restart: both scalars, and dt - 0.0 = dt > 0)
            productive = np.maximum(held - d, 0.0) if any_fin or rs.delayed else dt
            st.progress[run] = prog + rate * productive  # the jobs that finish: set to their total below
            if rs.delayed:
                st.delay_left[run] = np.maximum(d - dt, 0.0)
            # hold_s, gpu_s, attained, worker_s, ps_s, slow_s += held x (1, workers, workers, workers,
            # PSs, slowdown), prod_s += productive: the same products, added in one operation
            # (through ``held``'s flat view: one-dimensional indexing costs less than ``held[:, run]``).
            add = rs.per_held * held
            if productive is not dt:  # (row 1 of ``per_held`` is ones: held x 1 where it is dt)
                add[1] = productive
            st.held.reshape(-1)[rs.held_flat] += add.reshape(-1)
            if any_fin:
                fi = run[fin]
                fl = fi.tolist()  # as Python ints, which index lists and dicts faster
                fr = fin_rel[fin]
                early = dt - fr
                st.progress[fi] = self.total[fi]
                st.finish[fi] = st.time_s + fr
                st.contention[fi] -= n_act * early
                acc.job_seconds -= float(np.add.reduce(early))  # ``ndarray.sum``'s reduction
                st.done[fi] = True
                st.is_active[fi] = False
                gone = [st.running.pop(i) for i in fl]
                if self._whole_loads and fi.size <= 2:  # more at once: one vectorised pass is cheaper
                    for i, p in zip(fl, gone):
                        self._release(st, i, p)
                else:
                    dg, dc, dm = loads(self.topo, gone, fi, self.res)
                    st.gpu_tasks -= dg
                    st.cores_used -= dc
                    st.mem_used -= dm
                for i in fl:
                    st.placements[i] = None
                    acc.completions.append(self.jobs[i].job_id)
                    st.active.remove(i)  # in place, keeping the order (a job or two finish at a time)
                st.n_workers[fi] = st.n_ps[fi] = 0
                st.act_idx = st.run_set = None
                st.n_finished += int(fi.size)
                st.finished += fl
                st.dirty = True
        st.time_s += dt
        st.round_index += k
        acc.rounds += k
