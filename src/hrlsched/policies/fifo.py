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
                out[job.job_id] = Allocation(pl.n_workers, pl.n_ps)
                free -= pl.n_workers
        for job, pl in zip(view.jobs, view.placements):
            if pl is not None:
                continue
            if job.requested_gpus > free:
                break
            out[job.job_id] = Allocation(job.requested_gpus, 1 if job.arch == "ps" else 0)
            free -= job.requested_gpus
        return out
