"""What a finished (or stopped) simulation hands to metrics and the recorder."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hrlsched.core.job import Job


@dataclass
class SimResult:
    """Per-job totals and per-round series of a finished run."""

    jobs: list[Job]
    start_s: np.ndarray
    finish_s: np.ndarray
    restarts: np.ndarray
    gpu_seconds: np.ndarray
    hold_s: np.ndarray
    worker_seconds: np.ndarray
    ps_seconds: np.ndarray
    slowdown_seconds: np.ndarray
    productive_s: np.ndarray
    progress: np.ndarray
    contention_seconds: np.ndarray  # integral of the number of active jobs over the job's life
    isolated_duration_s: np.ndarray  # alone, at the requested GPUs, consolidated
    rounds: dict[str, np.ndarray]
    n_gpus: int
    end_time_s: float
    scheduler_calls: int
