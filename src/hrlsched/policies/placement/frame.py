"""Shared frame of placement policies: keep running jobs where they are when
their allocation is unchanged, then place the others in priority order."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from hrlsched.contract import ClusterView, Decision
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Allocation, PlacementPolicy
from hrlsched.policies.placement.occupancy import Occupancy


class IncrementalPlacement(PlacementPolicy):
    max_tasks_per_gpu: int = 1

    def place(self, view: ClusterView, allocations: dict[int, Allocation]) -> dict[int, Placement]:
        occ = Occupancy(view, self.max_tasks_per_gpu)
        out: dict[int, Placement] = {}
        pending: list[tuple[Job, Allocation]] = []
        kept: list[Job] = []
        for jid, a in allocations.items():
            i = view.index(jid)
            cur = view.placements[i]
            job = view.jobs[i]
            if cur is not None and cur.n_workers == a.workers and cur.n_ps == (a.ps if job.arch == "ps" else 0):
                out[jid] = cur
                kept.append(job)
            else:
                pending.append((job, a))
        occ.commit_many(kept, list(out.values()))
        for job, a in pending:
            n_ps = max(a.ps, 1) if job.arch == "ps" else 0
            pl = self.place_job(view, occ, job, a.workers, n_ps)
            if pl is not None and occ.fits(job, pl):
                out[job.job_id] = pl
                occ.commit(job, pl)
        return out

    def finish(self, view: ClusterView, decision: Decision) -> Decision:
        """The decision once every job of it is placed (a ``DecisionPoint``
        places job by job, then calls this): unchanged here; ``migrate``
        moves its scattered jobs."""
        return decision

    @abstractmethod
    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        """GPUs for ``n_workers`` workers and sockets for ``n_ps`` PSs, or None."""


def gpus_in_server(occ: Occupancy, server: int, n: int) -> np.ndarray:
    """Free GPUs of a server, filling the fullest-free PCIe switch (and its
    socket) first so that a job shares as few switches and sockets as it can."""
    return np.array(gpus_in_server_list(occ, server, n), dtype=np.int64)


def gpus_in_server_list(occ: Occupancy, server: int, n: int) -> list[int]:
    """``gpus_in_server`` as a list of ints (empty when the server has fewer than ``n`` free GPUs)."""
    topo = occ.topo
    lo = int(topo.server_first_gpu[server])
    hi = lo + int(topo.server_gpus[server])
    # A server has a handful of GPUs: Python lists beat numpy calls here.
    g = [lo + i for i, f in enumerate(occ.gpu_free[lo:hi].tolist()) if f > 0]
    if len(g) < n:
        return []
    sw_of = topo.gpu_switch[lo:hi].tolist()
    sock_of = topo.gpu_socket[lo:hi].tolist()
    sw_free: dict[int, int] = {}
    sock_free: dict[int, int] = {}
    for x in g:
        sw_free[sw_of[x - lo]] = sw_free.get(sw_of[x - lo], 0) + 1
        sock_free[sock_of[x - lo]] = sock_free.get(sock_of[x - lo], 0) + 1

    # Prefer a socket (then a switch) that can hold all n alone, the tightest such.
    def key(x: int) -> tuple[int, int, int, int, int]:
        so, sw = sock_free[sock_of[x - lo]], sw_free[sw_of[x - lo]]
        return (so if so >= n else 1 << 20, -so, sw if sw >= n else 1 << 20, -sw, x)

    return sorted(g, key=key)[:n]
