"""What a workload builder needs to turn a duration into work.

A trace gives durations; a simulated job needs its work in samples. The
builders get this small object instead of the performance model, so that
``workload/`` never imports ``perf/`` (both stand on ``core/``): the
scenario builds it from the performance model
(``PerformanceModel.work_sizer``), a test may build it from a plain
function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job


@dataclass(frozen=True)
class WorkSizer:
    """``progress_per_second(job)``: progress (samples at full statistical
    efficiency) per second of ``job`` alone at its requested GPUs and PSs,
    placed well. ``measured_work``: model -> samples to completion at a
    batch size, for the applications whose work was measured (the Pollux
    workloads, under the ``measured`` backend); empty otherwise.
    ``catalogue`` and ``n_gpus``: the models the builder may use and the
    cluster's GPU count."""

    catalogue: Mapping[str, ModelProfile]
    n_gpus: int
    progress_per_second: Callable[[Job], float]
    measured_work: Mapping[str, Callable[[int], float]] = field(default_factory=dict)

    def work_for_duration(self, job: Job, duration_s: float) -> float:
        """Samples that ``job`` processes in ``duration_s`` alone at its request."""
        return duration_s * self.progress_per_second(job)
