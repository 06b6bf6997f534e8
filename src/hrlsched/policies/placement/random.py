"""Random placement: workers on free GPUs drawn uniformly at random (among
servers with room for their CPU and memory), PSs on the sockets of those
workers first, then on the least-loaded servers' (``Occupancy.ps_sockets_for``,
as every placement here: so random only through the workers). The
placement-agnostic baseline of placement studies."""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.placement.occupancy import Occupancy


class RandomPlacement(IncrementalPlacement):
    name = "random"

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.rng = np.random.default_rng(rng.integers(2**63))

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        topo = occ.topo
        cap = occ.worker_capacity(job)
        if cap.sum() < n_workers:
            return None
        # Draw GPUs one at a time so no server exceeds its CPU/memory room.
        free = np.flatnonzero(occ.gpu_free > 0)
        free = free[cap[topo.gpu_server[free]] > 0]
        left = cap.copy()
        chosen: list[int] = []
        for g in self.rng.permutation(free):
            s = topo.gpu_server[g]
            if left[s] > 0:
                chosen.append(int(g))
                left[s] -= 1
                if len(chosen) == n_workers:
                    break
        if len(chosen) < n_workers:
            return None
        if n_ps == 0:
            return Placement.of(chosen)
        # A permutation of the sockets is still drawn (it once was meant for the PSs, which
        # ps_sockets_for never read), so that later jobs' draws, and the figures made with
        # this placement, are unchanged.
        self.rng.permutation(topo.n_sockets)
        ps = occ.ps_sockets_for(job, n_ps, np.asarray(chosen))
        return None if ps is None else Placement.of(chosen, ps)
