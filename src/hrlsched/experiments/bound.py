"""A lower bound on average JCT: the floor every comparison needs.

Each job is put alone on the empty cluster at its best allocation and its
JCT there is the floor of its JCT under any policy:

    floor_j = (first round at or after its arrival - arrival)
              + launch delay (when the engine charges one on first start)
              + work_j / max over allocations of (speed x statistical efficiency)

The maximum is over every worker count 1..cluster GPUs, every PS count 1..
the sockets its workers span (parameter-server jobs), and, where the job
leaves them open (``Job.arch_open``/``mode_open``), both architectures and
both modes (async all-reduce excluded, as the backends refuse it), each
at the consolidated placement (``PerformanceModel.compact_placement``:
workers packed from GPU 0, one switch, one socket, one server where they
fit; PSs on the workers' sockets; on a cluster of several GPU types, where
the job's model runs faster on a later type, its GPUs are taken fastest type
first, ``Topology.type_speed``). A backend's ``speed_ceiling`` (a cheap
upper bound on the speed at a worker count) prunes worker counts that
cannot beat the best found; the rest are solved in one vectorised
``isolated_speeds`` call per (model, batch, arch, mode). Where that search
passes ``SEARCH_BUDGET`` (GPUs of the placements solved), the worker counts
left count at their ceiling instead: a rate at least the true one, so the
floor stays a floor, looser for that job. Of the built-in scenarios only
``large`` (256 GPUs) reaches it: its bound is about 1% looser (seeds 0-2)
and much faster to compute; the 1,024-GPU clusters of the ``scale`` study
need it to finish at all.

Why it is a lower bound. The engine admits a job at the first round at or
after its arrival and charges the launch delay before it makes progress;
afterwards its progress rate at any moment is its speed at its current
placement times its statistical efficiency, and in the backends other jobs
only slow it down (link sharing stretches its transfers, rho >= max(1, u);
socket pressure counts their tasks; time-sharing a GPU divides it); restarts
add delays; queueing adds waiting. So its rate never exceeds its best rate
alone, and its JCT is at least the floor. Where this leans on assumptions:
(1) placements other than the consolidated one are taken to be no faster
alone (true of the optimus and measured backends; in the analytic one,
spreading a job over sockets lowers the socket pressure of its own tasks at
the price of QPI/NIC traffic, so a spread placement can be slightly faster
for a compute-bound job; the tests check the bound against the built-in
policies); (2) PS counts above the number of sockets the workers span are
not searched (in the consolidated family they only add PS overhead and
socket pressure), except on the optimus backend, which prices PSs by count
alone and is searched up to as many PSs as the cluster has GPUs; (3) the job's batch size is kept (a policy that tunes
batch sizes, as Pollux does on the measured backend, is outside the bound).
For a backend whose efficiency moves with progress (``progress_dependent``,
the measured one), the work is cut into ``segments`` pieces and each piece
runs at the best rate over the efficiencies at its two ends (exact when the
efficiency is monotone within a piece, as the gradient noise scale is).

Why it is loose. Every job gets the whole cluster to itself at once: the
bound ignores that jobs compete for GPUs (on ``default``, offered load is
about 1.6x capacity, so queueing is most of a real JCT) and that a job at
its best allocation often takes far more GPUs than a fair share.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel

EPS = 1e-9  # the engine's tolerance when it admits arrivals
# GPUs of the placements solved per search (each worker count times its PS counts) before the
# worker counts left are taken at their ceiling: at 1,024 GPUs a parameter-server job's ceiling
# (no communication) stays above its best speed up to hundreds of workers, each with up to a PS
# per socket, and solving them all took minutes and tens of GB per job.
SEARCH_BUDGET = 200_000


def _configs(job: Job, perf: PerformanceModel) -> list[tuple[str, str]]:
    """(arch, mode) pairs the job may run with."""
    archs = ("ps", "allreduce") if job.arch_open else (job.arch,)
    modes = ("sync", "async") if job.mode_open else (job.mode,)
    out = [(a, m) for a in archs for m in modes if not (a == "allreduce" and m == "async")]
    if perf.name == "measured":  # synchronous measurements only
        out = [(a, m) for a, m in out if m == "sync"] or [(job.arch, job.mode)]
    return out


class BestRates:
    """Best isolated progress rate per (model, batch, arch, mode), cached. The
    seeds of one scenario share these groups (same cluster, same backend), so
    one ``BestRates`` serves them all."""

    def __init__(self, perf: PerformanceModel, segments: int = 8) -> None:
        self.perf = perf
        topo = perf.topology
        self.G = topo.n_gpus
        # Sockets spanned by the first w GPUs (the consolidated placement).
        new_socket = np.zeros(self.G, dtype=np.int64)
        new_socket[np.unique(topo.gpu_socket, return_index=True)[1]] = 1
        self.spanned = np.concatenate([[0], np.cumsum(new_socket)])
        self.segments = segments
        self.cache: dict[tuple, np.ndarray] = {}
        self.placements: dict[tuple[int, int, int], Placement] = {}
        # GPU orders other than the cluster's own (several GPU types): per model,
        # its fastest type first (Topology.type_speed); index 0 is GPU 0 on.
        self.orders: list[tuple[np.ndarray, np.ndarray]] = []
        self.order_of: dict[str, int] = {}
        self.capped = 0  # searches stopped by SEARCH_BUDGET (their rate: the ceiling of the rest)

    def order(self, model: str) -> int:
        """The job's GPUs are taken in this order: GPU 0 on (0) or, where the
        model is faster on a later GPU type, fastest type first (1, 2, ...)."""
        k = self.order_of.get(model)
        if k is None:
            topo = self.perf.topology
            speed = topo.model_gpu_speed(model)
            k = 0
            if np.any(np.diff(speed) > 0):  # a faster GPU after a slower one
                gpus = np.argsort(-speed, kind="stable")
                for i, (o, _) in enumerate(self.orders):
                    if np.array_equal(o, gpus):
                        k = i + 1
                        break
                else:
                    new = np.zeros(self.G, dtype=np.int64)
                    new[np.unique(topo.gpu_socket[gpus], return_index=True)[1]] = 1
                    self.orders.append((gpus, np.concatenate([[0], np.cumsum(new)])))
                    k = len(self.orders)
            self.order_of[model] = k
        return k

    def placement(self, w: int, p: int, order: int = 0) -> Placement:
        pl = self.placements.get((order, w, p))
        if pl is None:
            if order == 0:
                pl = self.perf.compact_placement(w, p)
            else:
                gpus = self.orders[order - 1][0][:w]
                sockets = np.unique(self.perf.topology.gpu_socket[gpus])
                pl = Placement.of(gpus, sockets[np.arange(p) % len(sockets)] if p else np.array([], dtype=int))
            self.placements[(order, w, p)] = pl
        return pl

    def candidates(self, arch: str, ws: np.ndarray, order: int = 0) -> tuple[np.ndarray, np.ndarray]:
        if arch != "ps":
            return ws, np.zeros_like(ws)
        # The optimus backend prices PSs by count only (theta2 w / p + theta4 p),
        # so any count up to the cluster's GPUs may win there; in the others a
        # PS beyond one per socket the workers span only adds overhead.
        spanned = self.spanned if order == 0 else self.orders[order - 1][1]
        reps = np.full_like(ws, self.G) if self.perf.name == "optimus" else spanned[ws]
        w = np.repeat(ws, reps)
        p = np.arange(w.size) - np.repeat(np.cumsum(reps) - reps, reps) + 1
        return w, p

    def rates(self, job: Job, ws: np.ndarray, progress: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(w, progress rate at each progress point) of every candidate with w in ``ws``."""
        perf = self.perf
        order = self.order(job.model)
        w, p = self.candidates(job.arch, ws, order)
        pls = [self.placement(int(a), int(b), order) for a, b in zip(w, p)]
        jobs = [job] * len(pls)
        batch = np.full(len(pls), job.batch_size, dtype=np.int64)
        try:
            speed = perf.isolated_speeds(jobs, pls, batch)
        except ValueError:  # a measured backend has no data for some of them: those cannot be the best
            speed = np.array([perf.alone_speed_or_zero(job, pl, int(b)) for pl, b in zip(pls, batch.tolist())])
        ok = speed > 0
        eff = np.zeros((len(pls), progress.size))
        if ok.any():
            sel = np.flatnonzero(ok)
            jo, po, bo = [jobs[i] for i in sel], [pls[i] for i in sel], batch[sel]
            eff[sel] = np.stack([perf.efficiency(jo, po, bo, np.full(sel.size, x)) for x in progress], axis=1)
        return w, speed[:, None] * eff

    def best(self, job: Job) -> np.ndarray:
        """Best rate over allocations at each of ``segments`` + 1 progress
        points 0..total (one point when efficiency does not move with progress)."""
        key = (job.model, job.batch_size, job.arch, job.mode,
               job.total_samples if self.perf.progress_dependent else None)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        k = self.segments if self.perf.progress_dependent else 0
        progress = np.linspace(0.0, job.total_samples, k + 1)
        all_w = np.arange(1, self.G + 1)
        ceiling = None if self.perf.progress_dependent else self.perf.speed_ceiling(job, all_w)
        if ceiling is None:
            _, r = self.rates(job, all_w, progress)
            out = r.max(axis=0)
        else:
            # Ceiling x the best efficiency at each w (efficiency does not
            # depend on the placement in these backends, only on w).
            pls = [self.placement(int(w), 1 if job.arch == "ps" else 0, self.order(job.model)) for w in all_w]
            eff = self.perf.efficiency([job] * self.G, pls, np.full(self.G, job.batch_size), np.zeros(self.G))
            top = ceiling * eff
            order = np.argsort(-top, kind="stable")
            out = np.zeros(progress.size)
            done = 0
            step = 4
            spent = 0
            while done < order.size and top[order[done]] > out.min():
                if spent >= SEARCH_BUDGET:
                    # the worker counts left at their ceiling: a rate no placement of theirs exceeds
                    out = np.maximum(out, top[order[done]])
                    self.capped += 1
                    break
                chunk = order[done:done + step]
                w, r = self.rates(job, all_w[chunk], progress)
                out = np.maximum(out, r.max(axis=0))
                done += chunk.size
                spent += int(w.sum())
                step = min(step * 2, 8)  # larger chunks of large allocations (x their PS counts) exhaust memory
        self.cache[key] = out
        return out

    def floor_run_s(self, job: Job) -> float:
        """Shortest time to do the job's work alone, over its (arch, mode) choices."""
        best = math.inf
        for arch, mode in _configs(job, self.perf):
            r = self.best(replace(job, arch=arch, mode=mode))
            if r.size == 1:
                t = job.total_samples / r[0]
            else:  # each piece of work at the best rate over its two ends
                piece = job.total_samples / (r.size - 1)
                t = float(np.sum(piece / np.maximum(r[:-1], r[1:])))
            best = min(best, t)
        return best


def _parts(built: Any, search: BestRates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(round wait, launch delay, shortest run) of each job, in seconds."""
    jobs: list[Job] = built.jobs
    eng = built.engine
    perf: PerformanceModel = built.perf
    T = float(eng.round_s)
    arrival = np.array([j.arrival_s for j in jobs], dtype=float)
    admit = np.ceil(arrival / T - EPS) * T  # rounds are at multiples of round_s
    wait = np.maximum(admit - arrival, 0.0)
    if eng.restart_on_first_start:
        launch = np.array([perf.profile(j).restart_s if eng.restart_s is None else eng.restart_s for j in jobs])
        if eng.restart_scale != 1.0:
            launch = launch * eng.restart_scale
    else:
        launch = np.zeros(len(jobs))
    run = np.array([search.floor_run_s(j) for j in jobs], dtype=float)
    return wait, launch, run


def job_floors(built: Any, segments: int = 8, rates: BestRates | None = None) -> np.ndarray:
    """Floor of each job's JCT (seconds), in the order of ``built.jobs``."""
    return sum(_parts(built, rates or BestRates(built.perf, segments)))  # type: ignore[return-value]


def lower_bound(built: Any, segments: int = 8, rates: BestRates | None = None) -> dict[str, float]:
    """Lower bound on the average JCT of ``built`` (a ``scenario.BuiltScenario``):
    ``avg_jct_s`` (the mean of the jobs' floors), ``p50_jct_s``, ``jobs``, and
    the mean of each part: ``avg_wait_s`` (to the first round),
    ``avg_launch_s`` and ``avg_run_s`` (at the best rate alone). ``rates``:
    a ``BestRates`` of the same cluster and backend to reuse (other seeds)."""
    wait, launch, run = _parts(built, rates or BestRates(built.perf, segments))
    floors = wait + launch + run
    return {
        "avg_jct_s": float(floors.mean()),
        "p50_jct_s": float(np.median(floors)),
        "avg_wait_s": float(wait.mean()),
        "avg_launch_s": float(launch.mean()),
        "avg_run_s": float(run.mean()),
        "jobs": len(floors),
    }
