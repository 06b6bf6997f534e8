"""AlloX (Le et al., "AlloX: Compute Allocation in Hybrid Clusters",
EuroSys'20).

Rules followed:
- Jobs are matched to (resource type, position) slots by a min-cost
  bipartite matching (``scipy.optimize.linear_sum_assignment``): on a
  machine of type t, the job in the k-th position from the end delays k jobs
  (itself included), so the slot costs k x p[j, t], p the job's processing
  time on type t; the matching minimises the sum of completion times over
  all jobs and types (Bruno, Coffman and Sethi's formulation, which AlloX
  uses for its CPU/GPU choice).
- On each type jobs start in their matched order (largest k first); the
  matching is recomputed for the waiting jobs at arrivals and completions;
  running jobs are not preempted.
- Fairness knob alpha: only the fraction alpha of waiting jobs that waited
  longest enter the matching (1: all, pure efficiency).

Departures: the paper's resource types are CPU and GPU servers and its jobs
use one machine; here the types are the cluster's GPU types and a job needs
its requested GPUs, so a type of G_t GPUs counts as G_t / (mean request)
parallel machines; processing times are the predicted remaining work over
the predictor's speed alone on that type (per model and type, as every
backend reads it from ``Topology.type_speed``; exact unless the scenario sets
``predictor``; the paper estimates them by profiling); a job larger than
every GPU type is refused with an error.
"""

from __future__ import annotations

import math

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Scheduler
from hrlsched.policies.gavel import check_one_type, place_on_type
from hrlsched.policies.placement.occupancy import Occupancy


def allox_matching(p: np.ndarray, machines: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Optimal (type, position-from-end) of each job: p (jobs x types)
    processing times (inf: cannot run there), machines (types) parallel
    machines of each type. Returns type, position and the total completion time."""
    from scipy.optimize import linear_sum_assignment  # scipy only for runs that use AlloX

    n, k = p.shape
    m = np.asarray(machines, dtype=np.int64)
    per = np.maximum(1, -(-n // np.maximum(m, 1)))  # positions per machine: ceil(n / machines)
    ct = np.repeat(np.arange(k), per * m)  # a column per (type, position, machine)
    cp = np.concatenate([np.repeat(np.arange(1, per[t] + 1), m[t]) for t in range(k)])
    big = 1e18
    cost = np.where(np.isfinite(p[:, ct]), p[:, ct] * cp[None, :], big)
    rows, cols = linear_sum_assignment(cost)
    typ = np.empty(n, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    typ[rows], pos[rows] = ct[cols], cp[cols]
    return typ, pos, float(cost[rows, cols].sum())


class AlloX(Scheduler):
    name = "allox"
    reads_work = True  # (ClusterView.remaining: see contract.Scheduler)
    event_driven = True

    def __init__(self, alpha: float = 1.0) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"allox: alpha must be in (0, 1], got {alpha}")
        self.alpha = float(alpha)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.topo = topology
        self.types = np.unique(topology.gpu_type)
        self.capacity = np.array([np.count_nonzero(topology.gpu_type == t) for t in self.types])

    def processing_times(self, view: ClusterView, ks: list[int]) -> np.ndarray:
        topo = self.topo
        p = np.full((len(ks), len(self.types)), np.inf)
        for ti, t in enumerate(self.types):
            gpus = np.flatnonzero(topo.gpu_type == t)
            for row, k in enumerate(ks):
                job = view.jobs[k]
                if job.requested_gpus > gpus.size:
                    continue
                g = gpus[: job.requested_gpus]
                ps = topo.gpu_socket[g[: job.num_ps_requested]] if job.arch == "ps" else ()
                sp = view.perf.alone_speed(job, Placement.of(g, ps), int(view.batch_sizes[k]))
                p[row, ti] = float(view.remaining[k]) / sp
        return p

    def decide(self, view: ClusterView) -> Decision:
        out = Decision()
        running = [k for k, pl in enumerate(view.placements) if pl is not None]
        for k in running:
            out.placements[view.jobs[k].job_id] = view.placements[k]
        waiting = [k for k, pl in enumerate(view.placements) if pl is None]
        if not waiting:
            return out
        check_one_type(self.name, view, self.types, self.capacity)
        waiting.sort(key=lambda k: view.jobs[k].arrival_s)
        waiting = waiting[: max(1, math.ceil(self.alpha * len(waiting)))]
        p = self.processing_times(view, waiting)
        mean_req = float(np.mean([view.jobs[k].requested_gpus for k in waiting]))
        machines = np.maximum(1, np.floor(self.capacity / mean_req)).astype(np.int64)
        typ, pos, _ = allox_matching(p, machines)
        occ = Occupancy(view)
        occ.commit_many([view.jobs[k] for k in running], [view.placements[k] for k in running])
        for row in np.lexsort((-pos, typ)):
            k = waiting[int(row)]
            pl = place_on_type(occ, view, k, int(self.types[typ[row]]))
            if pl is not None:
                occ.commit(view.jobs[k], pl)
                out.placements[view.jobs[k].job_id] = pl
        return out
