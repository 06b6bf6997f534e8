"""Test helpers: hand-built jobs and a scripted scheduler."""

from __future__ import annotations

from collections.abc import Callable

from hrlsched.cluster import Placement
from hrlsched.policies.base import Scheduler
from hrlsched.sim.view import ClusterView, Decision
from hrlsched.workload import Job


def job(job_id: int, arrival: float = 0.0, model: str = "resnet-50", samples: float = 1e4, gpus: int = 1,
        arch: str = "ps", batch: int = 32, mode: str = "sync") -> Job:
    return Job(job_id=job_id, arrival_s=arrival, model=model, total_samples=samples, batch_size=batch,
               requested_gpus=gpus, arch=arch, mode=mode)  # type: ignore[arg-type]


class Scripted(Scheduler):
    """Returns ``fn(view)`` every round."""

    name = "scripted"

    def __init__(self, fn: Callable[[ClusterView], dict[int, Placement] | Decision], event_driven: bool = False,
                 max_tasks_per_gpu: int = 1) -> None:
        self.fn = fn
        self.event_driven = event_driven
        self.max_tasks_per_gpu = max_tasks_per_gpu

    def decide(self, view: ClusterView) -> Decision:
        out = self.fn(view)
        return out if isinstance(out, Decision) else Decision(placements=out)
