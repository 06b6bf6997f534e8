"""Optimus (Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for
Deep Learning Clusters", EuroSys'18).

Rules followed:
- Convergence: each job's training loss is observed as it progresses and
  fitted online to l(k) = 1 / (b0 k + b1) + b2 (``workload.convergence``);
  its remaining steps are those until l(k) - b2 falls under the
  convergence threshold. Until three points are seen, a job is assumed to
  be as far from convergence as it has come (remaining = done, at least
  ``min_steps``).
- Speed: f(w, p) for the job's throughput; here the performance model's
  prediction of the job alone at (w, p) (``PerformanceModel.isolated_speed``,
  which with the default catalogue is the Optimus function fitted on the DL2
  measurements) instead of an online refit of f from the job's own runs.
- Allocation (Sec. 4.1): every job first gets one worker (and one PS for a
  PS job) in arrival order while resources last; then, repeatedly, the next
  task (a worker, or a PS) goes to the job whose remaining time
  T = remaining steps x batch / f(w, p) drops most per unit of dominant
  resource the task takes, until no task fits or no gain is positive.
- Re-allocation every ``interval_s`` (10 minutes in the paper), and when
  jobs arrive or finish.
- Placement (Sec. 4.2): its own ``optimus`` placement: the fewest servers
  that hold the job, workers and PSs spread evenly over them.

Extensions, off in the registered ``optimus`` (the paper's rules above),
are the settings of ``policies.hint.HintConfig`` (their one home: docs,
defaults, validation), passed as ``tuning``: ``remaining_weight`` (gains
relative to the job's remaining time), ``keep_s`` and ``keep_frac`` (a
running job grows only for a large enough drop of its remaining time, as a
change costs a restart the paper's gain leaves out), ``first_order``
(shortest predicted remaining time first for the first workers),
``observe_rounds`` (one loss observation per round run, for a caller asked
only at events) and ``remaining_from`` (``"view"``: the scenario's
predictor, exact by default, instead of the loss-curve fit, which errs by
factors early in a job on real traces), ``batch`` (``"goodput"``: on the
Pollux traces each worker count priced at its batch of best goodput, the
batch ``policies.goodput_batch`` then gives the job; ``speeds`` of
``GoodputBatch``). ``worker_counts``: a job's workers
step along these counts (the agent's menu, with ``HintConfig.on_menu``)
instead of one at a time, so that the hint's choice is a menu slot. The
``hrl`` agent's hint and the ``optimus-tuned`` heuristic run with them
(docs/agent.md).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import capacity
from hrlsched.policies.goodput_batch import GoodputBatch
from hrlsched.policies.hint import HintConfig
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.placement.occupancy import Occupancy
from hrlsched.workload.convergence import (
    fit_curve,
    fit_curves,
    loss_on_curve,
    steps_to_converge,
    true_curve,
)

MAX_BACKFILL = 10_000  # ``observe_rounds``: most points added at one call


class Optimus(AllocationPolicy):
    name = "optimus"
    event_driven = False
    default_placement = "optimus"

    def __init__(self, interval_s: float = 600.0, max_scale: int = 4, min_steps: float = 100.0,
                 tuning: HintConfig | None = None, worker_counts: Sequence[int] | None = None) -> None:
        for name, v in (("interval_s", interval_s), ("min_steps", min_steps)):
            if not (v >= 0 and np.isfinite(v)):
                raise ValueError(f"optimus: {name}: expected a finite number >= 0, got {v!r}")
        if int(max_scale) != max_scale or max_scale < 1:
            raise ValueError(f"optimus: max_scale: expected a positive integer, got {max_scale!r}")
        self.interval_s = interval_s
        self.max_scale = max_scale
        self.min_steps = min_steps
        t = self.tuning = tuning if tuning is not None else HintConfig()
        self.remaining_weight = t.remaining_weight
        self.keep_s = t.keep_s
        self.keep_frac = t.keep_frac
        self.first_order = t.first_order
        self.observe_rounds = t.observe_rounds
        self.remaining_from = t.remaining_from
        self.reads_work = self.remaining_from == "view"
        self.worker_counts: tuple[int, ...] | None = None
        if worker_counts is not None:
            counts = sorted({int(c) for c in worker_counts})
            if not counts or counts[0] < 1 or any(int(c) != c for c in worker_counts):
                raise ValueError(f"optimus: worker_counts: expected positive integers, got {worker_counts!r}")
            self.worker_counts = tuple(counts if counts[0] == 1 else [1, *counts])

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.rng = rng
        self.obs: dict[int, tuple[list[float], list[float]]] = {}
        self.last_time = -np.inf
        self.last_ids: frozenset[int] = frozenset()
        self.last: dict[int, Allocation] = {}
        self.last_order: list[int] = []
        # Memos (pure functions of their keys, so the allocations are the same
        # as without them): each job's true loss curve, its fitted curve per
        # number of observations, and its predicted speed alone per (workers, PSs).
        self._curves: dict[tuple[int, float, int], tuple[float, float, float]] = {}
        self._fits: dict[int, tuple[int, tuple[float, float, float] | None]] = {}
        self._speeds: dict[tuple, float] = {}
        self._perf: object = None
        # ``HintConfig.batch = "goodput"``: worker counts priced at their batch of best goodput
        self._goodput = GoodputBatch() if self.tuning.batch == "goodput" else None
        if self._goodput is not None:
            self._goodput.reset(topology)

    def observe(self, view: ClusterView) -> None:
        curves, rng = self._curves, self.rng
        speeds = view.speed.tolist() if self.observe_rounds else None
        for i, (job, done, b) in enumerate(zip(view.jobs, view.progress.tolist(), view.batch_sizes.tolist())):
            step = done / b
            ks, ls = self.obs.setdefault(job.job_id, ([], []))
            if step > 0 and (not ks or step > ks[-1]):
                key = (job.job_id, job.total_samples, job.batch_size)
                curve = curves.get(key)
                if curve is None:
                    curve = curves[key] = true_curve(job)
                if speeds is not None and speeds[i] > 0:  # the rounds it ran since: one point each
                    last = ks[-1] if ks else 0.0
                    rounds = min(round((step - last) * b / (speeds[i] * view.round_s)), MAX_BACKFILL)
                    for r in range(1, rounds):
                        at = last + (step - last) * r / rounds
                        ks.append(at)
                        ls.append(loss_on_curve(curve, at, rng))
                ks.append(step)
                ls.append(loss_on_curve(curve, step, rng))

    def remaining_steps(self, view: ClusterView) -> np.ndarray:
        if self.remaining_from == "view":
            return np.maximum(view.remaining / view.batch_sizes, 1.0)  # no fit to guard: one step at least
        out = np.empty(len(view.jobs))
        fits = self._fits
        # Refit the jobs with new observations, those with as many points together.
        todo: dict[int, list[int]] = {}
        for job in view.jobs:
            memo = fits.get(job.job_id)
            m = len(self.obs[job.job_id][0])
            if memo is None or memo[0] != m:  # else no new observation: the same fit
                todo.setdefault(m, []).append(job.job_id)
        for m, jids in todo.items():
            if len(jids) == 1:
                ks, ls = self.obs[jids[0]]
                fits[jids[0]] = (m, fit_curve(np.asarray(ks), np.asarray(ls)))
                continue
            got = fit_curves(np.array([self.obs[j][0] for j in jids], dtype=float).reshape(len(jids), m),
                             np.array([self.obs[j][1] for j in jids], dtype=float).reshape(len(jids), m))
            for j, fit in zip(jids, got):
                fits[j] = (m, fit)
        for k, (job, done, b) in enumerate(zip(view.jobs, view.progress.tolist(), view.batch_sizes.tolist())):
            step = done / b
            fit = fits[job.job_id][1]
            est = steps_to_converge(fit[0], fit[1]) - step if fit else step
            out[k] = max(est, self.min_steps)
        return out

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        if self.remaining_from == "fit":
            self.observe(view)
        ids = frozenset(view.job_ids.tolist())
        if ids == self.last_ids and view.time_s - self.last_time < self.interval_s:
            return {j: a for j, a in self.last.items() if j in ids}
        self.last_ids, self.last_time = ids, view.time_s
        if view.perf is not self._perf:
            self._perf, self._speeds = view.perf, {}
        rem = self.remaining_steps(view).tolist()
        cap = capacity(view).tolist()
        # Python floats throughout: the same IEEE operations as the arrays of
        # ``job_demand`` and ``capacity``, in the same order, so the same choices.
        f0, f1, f2 = cap
        c0, c1, c2 = cap
        n = len(view.jobs)
        jobs = view.jobs
        bsz = view.batch_sizes.tolist()
        perf = view.perf
        n_gpus = view.topology.n_gpus
        w = [0] * n
        p = [0] * n
        is_ps = [j.arch == "ps" for j in jobs]
        profs = [perf.profile(j) for j in jobs]
        res = [(pr.worker_cores, pr.ps_cores, pr.worker_mem_gb, pr.ps_mem_gb) for pr in profs]
        top = [min(self.max_scale * j.requested_gpus, n_gpus) for j in jobs]
        speeds = self._speeds

        # Speeds kept per job, or per model where the predictor's depend on a job only through its
        # model (``per_model``): hundreds of new jobs then price each model once.
        per_model = perf.per_model
        # Under Pollux's batch rule, a job's speed at each count at the batch it would run at there;
        # those change as the job trains, so they are kept for this call only.
        good = self._goodput.speeds(view) if self._goodput is not None else None
        good_memo: dict[tuple[int, int], float] = {}

        def T(k: int, wk: int, pk: int) -> float:
            if good is not None and good[k] is not None:
                s = good_memo.get((k, wk))
                if s is None:
                    s = good_memo[(k, wk)] = good[k](wk)  # type: ignore[misc]
                if s > 0:
                    return rem[k] * bsz[k] / s
            job = jobs[k]
            key = (job.model if per_model else job.job_id, job.arch, job.mode, bsz[k], wk, pk)
            s = speeds.get(key)
            if s is None:
                s = speeds[key] = perf.isolated_speed(job, wk, pk, bsz[k])
            return rem[k] * bsz[k] / s

        alpha = self.remaining_weight

        counts = self.worker_counts

        def best_option(k: int) -> tuple[float, tuple[int, int, float, float, float] | None]:
            wk, pk = w[k], p[k]
            now = T(k, wk, pk)
            scale = max(now, 1.0) ** alpha if alpha else 1.0
            best: tuple[float, tuple[int, int, float, float, float] | None] = (0.0, None)
            wc, pc, wm, pm = res[k]
            up = wk + 1
            if counts is not None:  # the next count of the menu
                i = bisect.bisect_right(counts, wk)
                up = counts[i] if i < len(counts) else top[k] + 1
            for nw, np_ in ((up, pk), (wk, pk + 1)):
                if nw > wk:
                    if not nw <= top[k]:
                        continue
                elif not (is_ps[k] and pk < wk):
                    continue
                n0 = float(nw) - float(wk)
                n1 = float(nw * wc + np_ * pc) - float(wk * wc + pk * pc)
                n2 = float(nw * wm + np_ * pm) - float(wk * wm + pk * pm)
                if n0 > f0 + 1e-9 or n1 > f1 + 1e-9 or n2 > f2 + 1e-9:
                    continue
                gain = (now - T(k, nw, np_)) / max(_max_ratio(n0, n1, n2, c0, c1, c2), 1e-12)
                if alpha:
                    gain /= scale
                if gain > best[0]:
                    best = (gain, (nw, np_, n0, n1, n2))
            return best

        if self.first_order == "remaining":  # the shortest predicted remaining time at one worker first
            first = sorted(range(n), key=lambda k: (T(k, 1, int(is_ps[k])), jobs[k].arrival_s, k))
        else:
            first = np.argsort([j.arrival_s for j in jobs], kind="stable").tolist()
        for k in first:
            ps1 = int(is_ps[k])
            wc, pc, wm, pm = res[k]
            n0, n1, n2 = 1.0, float(wc + ps1 * pc), float(wm + ps1 * pm)
            if n0 <= f0 + 1e-9 and n1 <= f1 + 1e-9 and n2 <= f2 + 1e-9:
                f0, f1, f2 = f0 - n0, f1 - n1, f2 - n2
                w[k], p[k] = 1, ps1
        # The task with the largest gain next (the lowest index among equal
        # gains, as an argmax would take); stale heap entries are skipped.
        moves: list[tuple[int, int, float, float, float] | None] = [None] * n
        stamp = [0] * n
        heap: list[tuple[float, int, int]] = []
        for k in range(n):
            if w[k] > 0:
                g, moves[k] = best_option(k)
                if g > 0:
                    heap.append((-g, k, 0))
        heapq.heapify(heap)
        while heap:
            _, k, st = heapq.heappop(heap)
            if st != stamp[k]:
                continue
            mv = moves[k]
            if mv is not None and not (mv[2] > f0 + 1e-9 or mv[3] > f1 + 1e-9 or mv[4] > f2 + 1e-9):
                nw, np_, n0, n1, n2 = mv
                f0, f1, f2 = f0 - n0, f1 - n1, f2 - n2
                w[k], p[k] = nw, np_
            # else: free space shrank since: re-evaluate
            g, moves[k] = best_option(k)
            stamp[k] += 1
            if g > 0:
                heapq.heappush(heap, (-g, k, stamp[k]))
        if self.keep_s > 0 or self.keep_frac > 0:
            for k, pl in enumerate(view.placements):
                if pl is None or w[k] == 0 or (w[k], p[k]) == (pl.n_workers, pl.n_ps):
                    continue
                wc, pc = pl.n_workers, pl.n_ps
                if w[k] < wc:
                    continue
                t_now = T(k, wc, max(pc, int(is_ps[k])))
                if t_now - T(k, w[k], p[k]) < max(self.keep_s, self.keep_frac * t_now):
                    w[k], p[k] = wc, pc  # what it gives back stays free until the next allocation
        self.last = {jobs[k].job_id: Allocation(w[k], p[k]) for k in range(n) if w[k] > 0}
        self.last_order = [jobs[k].job_id for k in first if w[k] > 0]  # the order of the first workers
        return dict(self.last)

    def priority(self, allocs: dict[int, Allocation]) -> list[int]:
        """The jobs of ``allocs`` in the order of their first worker (arrival
        order, or shortest predicted remaining time first with
        ``first_order="remaining"``); ``allocate``'s dict order stays the
        view's, as the paper's placement order."""
        order = [j for j in self.last_order if j in allocs]
        return order + [j for j in allocs if j not in set(order)] if len(order) < len(allocs) else order


def _max_ratio(n0: float, n1: float, n2: float, c0: float, c1: float, c2: float) -> float:
    """``float(np.max(need / cap))`` for three resources, NaN and infinities alike."""
    if c0 and c1 and c2:
        return max(n0 / c0, n1 / c1, n2 / c2)
    return float(np.max(np.array([n0, n1, n2]) / np.array([c0, c1, c2])))


class OptimusPlacement(IncrementalPlacement):
    """The fewest servers that can hold the job; workers and PSs spread
    evenly over them (Optimus, Sec. 4.2)."""

    name = "optimus"

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        topo = occ.topo
        cap = occ.worker_capacity(job)
        order = np.argsort(-cap, kind="stable")
        total = np.cumsum(cap[order])
        if total[-1] < n_workers:
            return None
        m = int(np.searchsorted(total, n_workers)) + 1
        servers = order[:m]
        # Even split, bounded by each server's room.
        share = np.full(m, n_workers // m)
        share[: n_workers % m] += 1
        while np.any(share > cap[servers]):
            over = share - cap[servers]
            k = int(np.argmax(over))
            share[k] -= 1
            room = np.flatnonzero(share < cap[servers])
            share[room[0]] += 1
        gpus = []
        for s, c in zip(servers, share):
            lo = topo.server_first_gpu[s]
            g = np.arange(lo, lo + topo.server_gpus[s])
            gpus += list(g[occ.gpu_free[g] > 0][:c])
        if n_ps == 0:
            return Placement.of(gpus)
        sockets = [int(x) for s in servers for x in topo.server_sockets(int(s))]
        ps = tuple(sockets[i % len(sockets)] for i in range(n_ps))
        return Placement.of(gpus, ps)
