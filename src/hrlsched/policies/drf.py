"""Dominant resource fairness (Ghodsi et al., "Dominant Resource Fairness:
Fair Allocation of Multiple Resource Types", NSDI'11), over GPUs, CPU cores
and memory, per job and elastic, as the DRF baseline of DL2 (Peng et al.,
2019): resources are handed out one task at a time (progressive filling) to
the job with the smallest dominant share (its largest share of any resource
type), a worker, and for a PS job a PS whenever its workers outnumber
``workers_per_ps`` x its PSs; a job grows up to its requested GPUs. Jobs are
re-balanced when jobs arrive or finish (each change restarts the job)."""

from __future__ import annotations

import heapq

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import capacity, job_demand


class DRF(AllocationPolicy):
    name = "drf"
    event_driven = True
    default_placement = "pack"

    def __init__(self, workers_per_ps: int = 4) -> None:
        self.workers_per_ps = workers_per_ps

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        cap = capacity(view)
        free = cap.copy()
        n = len(view.jobs)
        w = np.zeros(n, dtype=np.int64)
        p = np.zeros(n, dtype=np.int64)
        used = np.zeros((n, 3))
        heap = [(0.0, view.jobs[k].arrival_s, k) for k in range(n)]
        heapq.heapify(heap)
        while heap:
            _, _, k = heapq.heappop(heap)
            job = view.jobs[k]
            if w[k] >= job.requested_gpus:
                continue
            nw = w[k] + 1
            np_ = max(1, -(-nw // self.workers_per_ps)) if job.arch == "ps" else 0
            need = job_demand(view, k, nw, np_) - used[k]
            if np.any(need > free + 1e-9):
                continue  # this job cannot grow; others may
            free -= need
            used[k] += need
            w[k], p[k] = nw, np_
            heapq.heappush(heap, (float(np.max(used[k] / cap)), job.arrival_s, k))
        return {view.jobs[k].job_id: Allocation(int(w[k]), int(p[k])) for k in np.argsort(-w, kind="stable") if w[k] > 0}
