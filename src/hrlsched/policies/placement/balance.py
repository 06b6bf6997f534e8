"""Load-balancing placement: each worker goes to the server with the most
free GPUs at that moment (least-loaded first), so jobs spread over servers
and leave no server hot. This is also the placement of the Pollux authors'
Tiresias re-implementation (``simulator/tiresias.py``: repeatedly the node
with the most free GPUs)."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.placement.frame import IncrementalPlacement, gpus_in_server
from hrlsched.policies.placement.occupancy import Occupancy


class BalancePlacement(IncrementalPlacement):
    memoryless = True
    name = "balance"

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        cap = occ.worker_capacity(job).astype(np.int64)
        if cap.sum() < n_workers:
            return None
        servers: list[int] = []
        counts: list[int] = []
        left = n_workers
        while left > 0:
            s = int(np.argmax(cap))  # most free first; ties: lowest index
            take = int(min(cap[s], left))
            servers.append(s)
            counts.append(take)
            cap[s] = 0
            left -= take
        gpus = np.concatenate([gpus_in_server(occ, s, c) for s, c in zip(servers, counts)])
        if gpus.size < n_workers:
            return None
        ps = occ.ps_sockets_for(job, n_ps, gpus)
        return None if ps is None else Placement.of(gpus, ps)
