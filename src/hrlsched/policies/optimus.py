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
"""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import capacity, job_demand
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.placement.occupancy import Occupancy
from hrlsched.workload.convergence import fit_curve, observed_loss, steps_to_converge


class Optimus(AllocationPolicy):
    name = "optimus"
    event_driven = False
    default_placement = "optimus"

    def __init__(self, interval_s: float = 600.0, max_scale: int = 4, min_steps: float = 100.0) -> None:
        self.interval_s = interval_s
        self.max_scale = max_scale
        self.min_steps = min_steps

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.rng = rng
        self.obs: dict[int, tuple[list[float], list[float]]] = {}
        self.last_time = -np.inf
        self.last_ids: frozenset[int] = frozenset()
        self.last: dict[int, Allocation] = {}

    def observe(self, view: ClusterView) -> None:
        for job, done, b in zip(view.jobs, view.progress, view.batch_sizes):
            step = done / b
            ks, ls = self.obs.setdefault(job.job_id, ([], []))
            if step > 0 and (not ks or step > ks[-1]):
                ks.append(step)
                ls.append(observed_loss(job, step, self.rng))

    def remaining_steps(self, view: ClusterView) -> np.ndarray:
        out = np.empty(len(view.jobs))
        for k, (job, done, b) in enumerate(zip(view.jobs, view.progress, view.batch_sizes)):
            step = done / b
            ks, ls = self.obs[job.job_id]
            fit = fit_curve(np.asarray(ks), np.asarray(ls))
            est = steps_to_converge(fit[0], fit[1]) - step if fit else step
            out[k] = max(est, self.min_steps)
        return out

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        self.observe(view)
        ids = frozenset(view.job_ids.tolist())
        if ids == self.last_ids and view.time_s - self.last_time < self.interval_s:
            return {j: a for j, a in self.last.items() if j in ids}
        self.last_ids, self.last_time = ids, view.time_s
        rem = self.remaining_steps(view)
        cap = capacity(view)
        free = cap.copy()
        n = len(view.jobs)
        w = np.zeros(n, dtype=np.int64)
        p = np.zeros(n, dtype=np.int64)
        is_ps = np.array([j.arch == "ps" for j in view.jobs])

        memo: dict[tuple[int, int, int], float] = {}

        def T(k: int, wk: int, pk: int) -> float:
            key = (k, wk, pk)
            if key not in memo:
                job = view.jobs[k]
                b = int(view.batch_sizes[k])
                memo[key] = rem[k] * b / view.perf.isolated_speed(job, wk, pk, b)
            return memo[key]

        def best_option(k: int) -> tuple[float, tuple[int, int, np.ndarray] | None]:
            job = view.jobs[k]
            now = T(k, w[k], p[k])
            best: tuple[float, tuple[int, int, np.ndarray] | None] = (0.0, None)
            options = []
            if w[k] < min(self.max_scale * job.requested_gpus, view.topology.n_gpus):
                options.append((w[k] + 1, p[k]))
            if is_ps[k] and p[k] < w[k]:
                options.append((w[k], p[k] + 1))
            for nw, np_ in options:
                need = job_demand(view, k, nw, np_) - job_demand(view, k, w[k], p[k])
                if np.any(need > free + 1e-9):
                    continue
                gain = (now - T(k, nw, np_)) / max(float(np.max(need / cap)), 1e-12)
                if gain > best[0]:
                    best = (gain, (nw, np_, need))
            return best

        for k in np.argsort([j.arrival_s for j in view.jobs], kind="stable"):
            need = job_demand(view, k, 1, int(is_ps[k]))
            if np.all(need <= free + 1e-9):
                free -= need
                w[k], p[k] = 1, int(is_ps[k])
        gains = np.zeros(n)
        moves: list[tuple[int, int, np.ndarray] | None] = [None] * n
        for k in np.flatnonzero(w > 0):
            gains[k], moves[k] = best_option(k)
        while gains.max(initial=0.0) > 0:
            k = int(np.argmax(gains))
            mv = moves[k]
            if mv is None or np.any(mv[2] > free + 1e-9):
                gains[k], moves[k] = best_option(k)  # free space shrank since: re-evaluate
                continue
            nw, np_, need = mv
            free -= need
            w[k], p[k] = nw, np_
            gains[k], moves[k] = best_option(k)
        self.last = {view.jobs[k].job_id: Allocation(int(w[k]), int(p[k])) for k in range(n) if w[k] > 0}
        return dict(self.last)


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
