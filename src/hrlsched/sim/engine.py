"""The round-based simulation engine.

Each round: arrivals join; the scheduler returns a decision (every round, or
only at rounds with an arrival or a completion for event-driven schedulers);
the decision is checked and applied (jobs whose placement changed pay their
restart delay); the performance model gives speeds; time advances, and a job
that finishes inside a round finishes at its exact time. The engine owns time
and state; per-job state lives in numpy arrays indexed by job.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, InvalidDecisionError
from hrlsched.core.catalogue import ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel

EPS = 1e-9


@dataclass(frozen=True)
class EngineConfig:
    round_s: float = 60.0
    max_time_s: float = 90 * 86400.0
    restart_s: float | None = None  # None: each model's own checkpoint-restart delay
    restart_on_first_start: bool = True  # the first start also pays the delay (launch)


@dataclass
class SimResult:
    """Per-job totals and per-round series of a finished run."""

    jobs: list[Job]
    start_s: np.ndarray
    finish_s: np.ndarray
    restarts: np.ndarray
    gpu_seconds: np.ndarray
    hold_s: np.ndarray
    worker_seconds: np.ndarray
    ps_seconds: np.ndarray
    slowdown_seconds: np.ndarray
    productive_s: np.ndarray
    progress: np.ndarray
    contention_seconds: np.ndarray  # integral of the number of active jobs over the job's life
    isolated_duration_s: np.ndarray  # alone, at the requested GPUs, consolidated
    rounds: dict[str, np.ndarray]
    n_gpus: int
    end_time_s: float
    scheduler_calls: int


class Simulator:
    def __init__(
        self,
        topology: Topology,
        jobs: Sequence[Job],
        perf: PerformanceModel,
        scheduler: object,
        config: EngineConfig | None = None,
        catalogue: Mapping[str, ModelProfile] | None = None,
        seed: int = 0,
    ) -> None:
        self.topo = topology
        self.perf = perf
        self.scheduler = scheduler
        self.cfg = config or EngineConfig()
        self.catalogue = dict(catalogue if catalogue is not None else perf.catalogue)
        self.seed = seed
        order = sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival_s, jobs[i].job_id))
        self.jobs = [jobs[i] for i in order]
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("workload: job_id values must be unique")
        self.index = {jid: i for i, jid in enumerate(ids)}
        self._check_jobs()

    def _check_jobs(self) -> None:
        g = self.topo.n_gpus
        for j in self.jobs:
            get_profile(j.model, self.catalogue)
            if j.requested_gpus > g:
                raise ValueError(
                    f"job {j.job_id} ({j.name}): requests {j.requested_gpus} GPUs, more than the "
                    f"cluster's {g}; cap or drop it when building the workload"
                )

    # ------------------------------------------------------------------ run
    def run(self, progress: Callable[[float, int, int], None] | None = None) -> SimResult:
        topo, cfg, jobs = self.topo, self.cfg, self.jobs
        n = len(jobs)
        T = float(cfg.round_s)
        sched = self.scheduler
        sched.reset(topo, np.random.default_rng(self.seed))
        event_driven = bool(getattr(sched, "event_driven", False))
        max_share = int(getattr(sched, "max_tasks_per_gpu", 1))
        progress_dependent = bool(self.perf.progress_dependent)

        profiles = [get_profile(j.model, self.catalogue) for j in jobs]
        arrival = np.array([j.arrival_s for j in jobs], dtype=float)
        total = np.array([j.total_samples for j in jobs], dtype=float)
        restart_cost = np.array(
            [p.restart_s if cfg.restart_s is None else cfg.restart_s for p in profiles], dtype=float
        )
        w_cores = np.array([p.worker_cores for p in profiles])
        w_mem = np.array([p.worker_mem_gb for p in profiles])
        p_cores = np.array([p.ps_cores for p in profiles])
        p_mem = np.array([p.ps_mem_gb for p in profiles])
        iso = np.array(
            [self.perf.isolated_speed(j, j.requested_gpus, j.num_ps_requested) for j in jobs], dtype=float
        )

        progress_s = np.zeros(n)
        batch = np.array([j.batch_size for j in jobs], dtype=np.int64)
        start = np.full(n, np.nan)
        finish = np.full(n, np.nan)
        restarts = np.zeros(n, dtype=np.int64)
        gpu_s = np.zeros(n)
        hold_s = np.zeros(n)
        worker_s = np.zeros(n)
        ps_s = np.zeros(n)
        slow_s = np.zeros(n)
        prod_s = np.zeros(n)
        attained = np.zeros(n)
        contention = np.zeros(n)
        delay_left = np.zeros(n)
        rate = np.zeros(n)  # progress per second (speed x statistical efficiency)
        speed = np.zeros(n)
        slowdown = np.ones(n)
        n_workers = np.zeros(n, dtype=np.int64)
        n_ps = np.zeros(n, dtype=np.int64)
        placements: list[Placement | None] = [None] * n
        running: dict[int, Placement] = {}  # job index -> placement, for running jobs
        alone = np.ones(n)  # speed alone at the current placement
        done = np.zeros(n, dtype=bool)
        is_active = np.zeros(n, dtype=bool)

        gpu_tasks = np.zeros(topo.n_gpus, dtype=np.int64)
        cores_used = np.zeros(topo.n_servers)
        mem_used = np.zeros(topo.n_servers)

        rec_t: list[np.ndarray] = []
        rec_cols: dict[str, list[np.ndarray]] = {k: [] for k in ("gpus_busy", "jobs_queued", "jobs_running", "mean_slowdown")}

        t = 0.0
        rnd = 0
        next_arrival = 0  # index of the first job not yet admitted
        active: list[int] = []
        dirty = True
        calls = 0

        while (next_arrival < n or active) and t < cfg.max_time_s:
            # Arrivals up to now join.
            while next_arrival < n and arrival[next_arrival] <= t + EPS:
                active.append(next_arrival)
                is_active[next_arrival] = True
                next_arrival += 1
                dirty = True
            if not active:
                # Idle cluster: jump to the round of the next arrival.
                k = max(1, math.ceil((arrival[next_arrival] - t) / T - EPS))
                self._record(rec_t, rec_cols, t, k, T, 0, 0, 0, 1.0)
                t += k * T
                rnd += k
                continue

            act = np.asarray(active, dtype=np.int64)
            just_set = False
            if dirty or not event_driven:
                view = ClusterView(
                    time_s=t,
                    round_index=rnd,
                    round_s=T,
                    topology=topo,
                    catalogue=self.catalogue,
                    perf=self.perf,
                    jobs=[jobs[i] for i in active],
                    progress=progress_s[act].copy(),
                    remaining=(total - progress_s)[act],
                    attained_gpu_s=attained[act].copy(),
                    running_s=hold_s[act].copy(),
                    restarts=restarts[act].copy(),
                    speed=speed[act].copy(),
                    batch_sizes=batch[act].copy(),
                    placements=[placements[i] for i in active],
                    gpu_tasks=gpu_tasks.copy(),
                    server_cores_used=cores_used.copy(),
                    server_mem_used=mem_used.copy(),
                )
                decision = sched.decide(view)
                calls += 1
                new, loads = self._validate(decision, running, is_active, max_share, w_cores, w_mem, p_cores, p_mem)
                changed: list[int] = []
                for i in [i for i in running if i not in new]:  # preempted
                    del running[i]
                    placements[i] = None
                    delay_left[i] = 0.0
                    n_workers[i] = n_ps[i] = 0
                    changed.append(i)
                new_batch = {self.index[jid]: int(b) for jid, b in decision.batch_sizes.items()}
                for i, pl in new.items():
                    old = running.get(i)
                    nb = new_batch.get(i)
                    rebatch = nb is not None and nb != batch[i]
                    if rebatch:
                        batch[i] = nb
                    if old is not None and (old is pl or old == pl):
                        if rebatch:  # a new batch size restarts the job too
                            delay_left[i] = restart_cost[i]
                            restarts[i] += 1
                            changed.append(i)
                        continue
                    running[i] = placements[i] = pl
                    n_workers[i], n_ps[i] = pl.n_workers, pl.n_ps
                    if np.isnan(start[i]):
                        start[i] = t
                        delay_left[i] = restart_cost[i] if cfg.restart_on_first_start else 0.0
                    else:
                        delay_left[i] = restart_cost[i]
                        restarts[i] += 1
                    changed.append(i)
                if changed:
                    gpu_tasks[:], cores_used[:], mem_used[:] = loads
                    rate[:] = 0.0
                    speed[:] = 0.0
                    if running:
                        ri = np.fromiter(running.keys(), dtype=np.int64, count=len(running))
                        pls = list(running.values())
                        rj = [jobs[i] for i in ri]
                        sp = self.perf.speeds(rj, pls, batch[ri])
                        if np.any(~np.isfinite(sp)) or np.any(sp <= 0):
                            bad = ri[int(np.flatnonzero(~(np.isfinite(sp) & (sp > 0)))[0])]
                            raise RuntimeError(f"performance model gave a non-positive speed for job {jobs[bad].job_id}")
                        speed[ri] = sp
                        rate[ri] = sp * self.perf.efficiency(rj, pls, batch[ri], progress_s[ri])
                        for i in changed:
                            if i in running:
                                alone[i] = self.perf.alone_speed(jobs[i], running[i], int(batch[i]))
                        slowdown[ri] = np.maximum(alone[ri] / sp, 1.0)
                    just_set = True
                dirty = False

            run = act[n_workers[act] > 0]
            if progress_dependent and run.size and not just_set:
                # Statistical efficiency moves with progress (e.g. per epoch).
                rl = [jobs[i] for i in run]
                rate[run] = speed[run] * self.perf.efficiency(rl, [placements[i] for i in run], batch[run], progress_s[run])
            # How many rounds until something happens (1 unless event-driven).
            k = 1
            if run.size:
                fin_rel = delay_left[run] + (total[run] - progress_s[run]) / rate[run]
            if event_driven and not progress_dependent:
                k_arr = math.ceil((arrival[next_arrival] - t) / T - EPS) if next_arrival < n else 1 << 40
                k_fin = math.ceil(float(fin_rel.min()) / T - EPS) if run.size else 1 << 40
                k_max = math.ceil((cfg.max_time_s - t) / T - EPS)
                k = max(1, min(k_arr, k_fin, k_max))
            dt = k * T

            busy = int(np.count_nonzero(gpu_tasks))
            mean_slow = float(slowdown[run].mean()) if run.size else 1.0
            self._record(rec_t, rec_cols, t, k, T, busy, len(active) - run.size, run.size, mean_slow)

            # Advance running jobs by dt; those that finish stop at their exact time.
            contention[act] += len(active) * dt  # corrected below for jobs that finish early
            if run.size:
                d = delay_left[run]
                fin = fin_rel <= dt + EPS
                held = np.where(fin, np.minimum(fin_rel, dt), dt)
                productive = np.maximum(held - d, 0.0)
                progress_s[run] = np.where(fin, total[run], progress_s[run] + rate[run] * productive)
                delay_left[run] = np.maximum(d - dt, 0.0)
                w, p = n_workers[run], n_ps[run]
                hold_s[run] += held
                prod_s[run] += productive
                gpu_s[run] += held * w
                attained[run] += held * w
                worker_s[run] += held * w
                ps_s[run] += held * p
                slow_s[run] += held * slowdown[run]
                if fin.any():
                    fi = run[fin]
                    finish[fi] = t + fin_rel[fin]
                    contention[fi] -= len(active) * (dt - fin_rel[fin])
                    done[fi] = True
                    is_active[fi] = False
                    gone = [running.pop(int(i)) for i in fi]
                    dg, dc, dm = self._loads(gone, fi, w_cores, w_mem, p_cores, p_mem)
                    gpu_tasks -= dg
                    cores_used -= dc
                    mem_used -= dm
                    for i in fi:
                        placements[i] = None
                    n_workers[fi] = n_ps[fi] = 0
                    active = [i for i in active if not done[i]]
                    dirty = True
            t += dt
            rnd += k
            if progress is not None:
                progress(t, int(done.sum()), n)

        rounds = {"time_s": np.concatenate(rec_t) if rec_t else np.zeros(0)}
        for key, chunks in rec_cols.items():
            rounds[key] = np.concatenate(chunks) if chunks else np.zeros(0)
        return SimResult(
            jobs=jobs,
            start_s=start,
            finish_s=finish,
            restarts=restarts,
            gpu_seconds=gpu_s,
            hold_s=hold_s,
            worker_seconds=worker_s,
            ps_seconds=ps_s,
            slowdown_seconds=slow_s,
            productive_s=prod_s,
            progress=progress_s,
            contention_seconds=contention,
            isolated_duration_s=total / iso,
            rounds=rounds,
            n_gpus=topo.n_gpus,
            end_time_s=t,
            scheduler_calls=calls,
        )

    # -------------------------------------------------------------- helpers
    @staticmethod
    def _record(rec_t, rec_cols, t, k, T, busy, queued, running, slow) -> None:
        rec_t.append(t + T * np.arange(k))
        rec_cols["gpus_busy"].append(np.full(k, busy, dtype=np.int64))
        rec_cols["jobs_queued"].append(np.full(k, queued, dtype=np.int64))
        rec_cols["jobs_running"].append(np.full(k, running, dtype=np.int64))
        rec_cols["mean_slowdown"].append(np.full(k, slow))

    def _loads(self, pls, idx, w_cores, w_mem, p_cores, p_mem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Workers per GPU, and CPU cores and memory used per server, by ``pls``
        (the placements of jobs ``idx``)."""
        topo = self.topo
        m = len(pls)
        wl = np.fromiter((len(p.gpus) for p in pls), dtype=np.int64, count=m)
        pl_ = np.fromiter((len(p.ps_sockets) for p in pls), dtype=np.int64, count=m)
        gflat = np.fromiter((g for p in pls for g in p.gpus), dtype=np.int64, count=int(wl.sum()))
        sflat = np.fromiter((s for p in pls for s in p.ps_sockets), dtype=np.int64, count=int(pl_.sum()))
        idx = np.asarray(idx, dtype=np.int64)
        wo, po = np.repeat(idx, wl), np.repeat(idx, pl_)
        gs, ss = topo.gpu_server[gflat], topo.socket_server[sflat]
        ns = topo.n_servers
        tasks = np.bincount(gflat, minlength=topo.n_gpus)
        cores = np.bincount(gs, weights=w_cores[wo], minlength=ns) + np.bincount(ss, weights=p_cores[po], minlength=ns)
        mem = np.bincount(gs, weights=w_mem[wo], minlength=ns) + np.bincount(ss, weights=p_mem[po], minlength=ns)
        return tasks, cores, mem

    def _check_job(self, jid: int, job: Job, pl: object) -> None:
        topo = self.topo
        if not isinstance(pl, Placement):
            raise InvalidDecisionError(f"job {jid}: placement must be a Placement, got {type(pl).__name__}")
        if pl.n_workers < 1:
            raise InvalidDecisionError(f"job {jid}: a running job needs at least one worker")
        if len(set(pl.gpus)) != pl.n_workers:
            raise InvalidDecisionError(f"job {jid}: two workers of one job on the same GPU {pl.gpus}")
        if min(pl.gpus) < 0 or max(pl.gpus) >= topo.n_gpus:
            raise InvalidDecisionError(f"job {jid}: GPU index out of range 0..{topo.n_gpus - 1}: {pl.gpus}")
        if job.arch == "ps":
            if pl.n_ps < 1:
                raise InvalidDecisionError(f"job {jid}: a parameter-server job needs at least one PS")
            if min(pl.ps_sockets) < 0 or max(pl.ps_sockets) >= topo.n_sockets:
                raise InvalidDecisionError(
                    f"job {jid}: PS socket index out of range 0..{topo.n_sockets - 1}: {pl.ps_sockets}"
                )
        elif pl.n_ps:
            raise InvalidDecisionError(f"job {jid}: an all-reduce job has no parameter servers, got {pl.n_ps}")

    def _validate(self, decision, running, is_active, max_share, w_cores, w_mem, p_cores, p_mem):
        """Check a decision against the cluster. Returns {job index: canonical
        placement} and the loads it puts on GPUs and servers."""
        topo, jobs = self.topo, self.jobs
        if not isinstance(decision, Decision):
            raise InvalidDecisionError(f"scheduler returned {type(decision).__name__}, expected a Decision")
        out: dict[int, Placement] = {}
        for jid, pl in decision.placements.items():
            i = self.index.get(jid)
            if i is None or not is_active[i]:
                raise InvalidDecisionError(f"job {jid}: not active (unknown, not yet arrived, or finished)")
            old = running.get(i)
            if old is not None and pl is old:  # unchanged: checked when it was made
                out[i] = pl
                continue
            self._check_job(jid, jobs[i], pl)
            out[i] = pl.canonical()
        for jid, bs in decision.batch_sizes.items():
            if jid not in decision.placements:
                raise InvalidDecisionError(f"job {jid}: batch size given for a job that does not run")
            if not isinstance(bs, (int, np.integer)) or isinstance(bs, bool) or bs < 1:
                raise InvalidDecisionError(f"job {jid}: batch size must be a positive integer, got {bs!r}")
        idx = np.fromiter(out.keys(), dtype=np.int64, count=len(out))
        pls = list(out.values())
        tasks, cores, mem = self._loads(pls, idx, w_cores, w_mem, p_cores, p_mem)
        if tasks.size and tasks.max() > max_share:
            g = int(np.argmax(tasks))
            who = sorted(jobs[i].job_id for i, p in zip(idx.tolist(), pls) if g in p.gpus)
            raise InvalidDecisionError(
                f"jobs {who}: {int(tasks[g])} workers on GPU {g}, at most {max_share} allowed by this scheduler"
            )
        for what, used, cap in (("CPU cores", cores, topo.server_cores), ("memory (GiB)", mem, topo.server_mem_gb)):
            over = np.flatnonzero(used > cap + 1e-9)
            if over.size:
                s = int(over[0])
                who = sorted(
                    jobs[i].job_id
                    for i, p in zip(idx.tolist(), pls)
                    if any(topo.gpu_server[g] == s for g in p.gpus)
                    or any(topo.socket_server[x] == s for x in p.ps_sockets)
                )
                raise InvalidDecisionError(f"jobs {who}: need {used[s]:g} {what} on server {s}, which has {cap[s]:g}")
        return out, (tasks, cores, mem)
