"""Shared frame of placement policies: keep running jobs where they are when
their allocation is unchanged, then place the others in priority order."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from hrlsched.contract import ClusterView
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

    @abstractmethod
    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        """GPUs for ``n_workers`` workers and sockets for ``n_ps`` PSs, or None."""


def gpus_in_server(occ: Occupancy, server: int, n: int) -> np.ndarray:
    """Free GPUs of a server, filling the fullest-free PCIe switch (and its
    socket) first so that a job shares as few switches and sockets as it can."""
    topo = occ.topo
    lo = topo.server_first_gpu[server]
    g = np.arange(lo, lo + topo.server_gpus[server])
    g = g[occ.gpu_free[g] > 0]
    if g.size < n:
        return g[:0]
    sw = topo.gpu_switch[g]
    sock = topo.gpu_socket[g]
    sw_free = np.bincount(sw, minlength=topo.n_switches)[sw]
    sock_free = np.bincount(sock, minlength=topo.n_sockets)[sock]
    # Prefer a socket (then a switch) that can hold all n alone, the tightest such.
    fits_sock = sock_free >= n
    fits_sw = sw_free >= n
    key = np.lexsort((g, -sw_free, np.where(fits_sw, sw_free, 1 << 20), -sock_free,
                      np.where(fits_sock, sock_free, 1 << 20)))
    return g[key[:n]]
