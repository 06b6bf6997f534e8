"""First-in, first-out with the user's request.

Jobs start in arrival order with their requested GPUs (and one PS for a
parameter-server job); a job that does not fit blocks those behind it (strict
FIFO, no backfilling), and nothing is preempted. The classic baseline of
every DL-scheduling paper (e.g. Tiresias, NSDI'19; DL2, 2019).
"""

from __future__ import annotations

from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy


class FIFO(AllocationPolicy):
    name = "fifo"
    event_driven = True
    default_placement = "pack"

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        out: dict[int, Allocation] = {}
        free = int(view.topology.n_gpus)
        for job, pl in zip(view.jobs, view.placements):
            if pl is not None:
                w = len(pl.gpus)
                out[job.job_id] = _allocation(w, len(pl.ps_sockets))
                free -= w
        # The queue in arrival order, read only up to its first job that does not fit (usually the head).
        for job in (job for job, pl in zip(view.jobs, view.placements) if pl is None):
            if job.requested_gpus > free:
                break
            out[job.job_id] = _allocation(job.requested_gpus, 1 if job.arch == "ps" else 0)
            free -= job.requested_gpus
        return out


_ALLOCATIONS: dict[tuple[int, int], Allocation] = {}


def _allocation(workers: int, ps: int) -> Allocation:
    """``Allocation(workers, ps)``, one shared object per pair (frozen; called for
    every running job at every decision point)."""
    a = _ALLOCATIONS.get((workers, ps))
    if a is None:
        a = _ALLOCATIONS[(workers, ps)] = Allocation(workers, ps)
    return a
