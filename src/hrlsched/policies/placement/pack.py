"""Bin-packing (consolidating) placement: a job goes to as few servers as it
can, the fullest server that still fits it first (best fit), and inside a
server to as few PCIe switches and sockets as it can."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.placement.frame import IncrementalPlacement, gpus_in_server_list
from hrlsched.policies.placement.occupancy import Occupancy


class PackPlacement(IncrementalPlacement):
    memoryless = True
    name = "pack"

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        if occ.worker_total(job) < n_workers:
            return None
        # Best fit, and leave room for the job's PS on the same server when we can.
        s = occ.fullest_fit(job, n_workers, n_ps)
        if s >= 0:
            gpus = gpus_in_server_list(occ, s, n_workers)
        else:
            cap = occ.worker_capacity(job)
            order = np.argsort(-cap, kind="stable")
            take = np.cumsum(cap[order])
            k = int(np.searchsorted(take, n_workers)) + 1
            counts = [int(c) for c in cap[order[:k]]]
            counts[-1] -= int(take[k - 1] - n_workers)
            gpus = [g for v, c in zip(order[:k].tolist(), counts) for g in gpus_in_server_list(occ, v, c)]
        if len(gpus) < n_workers:
            return None
        ps = occ.ps_sockets_for(job, n_ps, gpus)
        if ps is None:
            return None
        return Placement(tuple(gpus), ps)
