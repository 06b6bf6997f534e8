"""A training job as the simulator sees it: static facts, set at submission."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Arch = Literal["ps", "allreduce"]
Mode = Literal["sync", "async"]


@dataclass(frozen=True)
class Job:
    """One training job.

    Work is counted in training samples: ``total_samples`` is what the job must
    process to finish. ``batch_size`` is the global batch of a synchronous job
    and each worker's mini-batch of an asynchronous one.
    ``requested_gpus``/``requested_ps`` are the user's request, used by
    policies that honour one (FIFO, Tiresias); elastic policies may ignore it.

    ``arch_open``/``mode_open``: the job leaves its architecture / its
    synchronisation mode to the scheduler (``arch: any``, ``mode: any`` in a
    job spec). ``arch``/``mode`` then hold the workload's default, which a
    policy that does not choose keeps; a ``Decision`` may set another.
    """

    job_id: int
    arrival_s: float
    model: str
    total_samples: float
    batch_size: int
    requested_gpus: int = 1
    requested_ps: int = 1
    arch: Arch = "ps"
    mode: Mode = "sync"
    arch_open: bool = False
    mode_open: bool = False
    user: str = "default"
    name: str = ""
    # Duration in the trace this job came from (seconds), when known.
    trace_duration_s: float | None = None
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        errors = []
        if self.arrival_s < 0:
            errors.append(f"arrival_s: expected >= 0, got {self.arrival_s}")
        if not self.total_samples > 0:
            errors.append(f"total_samples: expected > 0, got {self.total_samples}")
        if self.batch_size < 1:
            errors.append(f"batch_size: expected >= 1, got {self.batch_size}")
        if self.requested_gpus < 1:
            errors.append(f"requested_gpus: expected >= 1, got {self.requested_gpus}")
        if self.arch not in ("ps", "allreduce"):
            errors.append(f"arch: expected 'ps' or 'allreduce', got {self.arch!r}")
        if self.mode not in ("sync", "async"):
            errors.append(f"mode: expected 'sync' or 'async', got {self.mode!r}")
        if self.arch == "ps" and self.requested_ps < 1:
            errors.append(f"requested_ps: a ps job needs at least 1 PS, got {self.requested_ps}")
        if errors:
            raise ValueError(f"job {self.job_id} ({self.name or self.model}): " + "; ".join(errors))
        if not self.name:
            object.__setattr__(self, "name", f"{self.model}-{self.job_id}")

    @property
    def num_ps_requested(self) -> int:
        return self.requested_ps if self.arch == "ps" else 0
