"""What a scheduler sees (``ClusterView``) and what it returns (``Decision``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel


@dataclass(frozen=True, eq=False)
class ClusterView:
    """A read-only snapshot at the start of a round.

    Per-job arrays are aligned with ``jobs``: the active jobs (arrived, not
    finished) in arrival order. ``remaining`` is the true remaining work: only
    oracle policies (SRTF with true remaining time) may read it.
    """

    time_s: float
    round_index: int
    round_s: float
    topology: Topology
    catalogue: Mapping[str, ModelProfile]
    perf: PerformanceModel
    jobs: list[Job]
    progress: np.ndarray  # samples done
    remaining: np.ndarray  # samples left (oracle)
    attained_gpu_s: np.ndarray  # GPU-seconds held so far
    running_s: np.ndarray  # seconds holding resources so far
    restarts: np.ndarray
    speed: np.ndarray  # samples/s over the last round (0 when not running)
    batch_sizes: np.ndarray
    placements: list[Placement | None]
    gpu_tasks: np.ndarray  # workers on each GPU
    server_cores_used: np.ndarray
    server_mem_used: np.ndarray
    _index: dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._index.update({j.job_id: i for i, j in enumerate(self.jobs)})

    @property
    def job_ids(self) -> np.ndarray:
        return np.fromiter((j.job_id for j in self.jobs), dtype=np.int64, count=len(self.jobs))

    def index(self, job_id: int) -> int:
        return self._index[job_id]

    @property
    def free_gpus(self) -> np.ndarray:
        """Mask of GPUs with no worker."""
        return self.gpu_tasks == 0

    @property
    def running(self) -> np.ndarray:
        return np.fromiter((p is not None for p in self.placements), dtype=bool, count=len(self.jobs))

    def age_s(self) -> np.ndarray:
        return self.time_s - np.fromiter((j.arrival_s for j in self.jobs), dtype=float, count=len(self.jobs))


@dataclass
class Decision:
    """The placement of every job that runs in the next round (absent: the
    job waits, or is preempted), and optionally a batch size per job (for
    policies that tune it)."""

    placements: dict[int, Placement] = field(default_factory=dict)
    batch_sizes: dict[int, int] = field(default_factory=dict)


class InvalidDecisionError(ValueError):
    """A scheduler returned a decision the cluster cannot carry out."""
