"""Bin-packing (consolidating) placement: a job goes to as few servers as it
can, the fullest server that still fits it first (best fit), and inside a
server to as few PCIe switches and sockets as it can."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.placement.frame import IncrementalPlacement, gpus_in_server
from hrlsched.policies.placement.occupancy import Occupancy


class PackPlacement(IncrementalPlacement):
    memoryless = True
    name = "pack"

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        cap = occ.worker_capacity(job)
        if cap.sum() < n_workers:
            return None
        fit = np.flatnonzero(cap >= n_workers)
        if fit.size:
            # Best fit, and leave room for the job's PS on the same server when we can.
            ps_room = occ.worker_capacity(job, reserve_ps=n_ps)
            better = fit[ps_room[fit] >= n_workers]
            cand = better if better.size else fit
            servers = [int(cand[np.argmin(cap[cand])])]
            counts = [n_workers]
        else:
            order = np.argsort(-cap, kind="stable")
            take = np.cumsum(cap[order])
            k = int(np.searchsorted(take, n_workers)) + 1
            servers = [int(s) for s in order[:k]]
            counts = [int(c) for c in cap[order[:k]]]
            counts[-1] -= int(take[k - 1] - n_workers)
        gpus = np.concatenate([gpus_in_server(occ, s, c) for s, c in zip(servers, counts)])
        if gpus.size < n_workers:
            return None
        ps = occ.ps_sockets_for(job, n_ps, np.asarray(servers), gpus)
        if ps is None:
            return None
        return Placement.of(gpus, ps)
