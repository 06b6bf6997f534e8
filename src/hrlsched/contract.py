"""The scheduler contract: what a scheduler sees (``ClusterView``), what it
returns (``Decision``) and what it is (``Scheduler``). The engine
(``hrlsched.sim``) types against this module only; policies and the RL agent
implement ``Scheduler``.

What a policy may know is kept apart from the simulator's truth: a view's
``perf`` and ``remaining`` are the *predictor's* (by default the simulator's
own model with no error, so that the two coincide); a scheduler marked
``oracle = True`` is given the true model and the true remaining work.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel

# When the engine asks for a decision: every round; only at rounds where a job
# arrived or finished; or every ``k`` rounds (rounds whose index is a multiple of k).
DecisionPoints = Literal["round", "events", "every"]
ARCHS = ("ps", "allreduce")
MODES = ("sync", "async")


@dataclass(frozen=True, eq=False)
class ClusterView:
    """A read-only snapshot at a decision point.

    Per-job arrays are aligned with ``jobs``: the active jobs (arrived, not
    finished) in arrival order. ``jobs`` carry each job's *effective*
    architecture and mode (its own, or what a decision chose where the job
    leaves them open). ``perf`` is the predictor the policy may use and
    ``remaining`` the predicted remaining work; both are the truth when the
    predictor has no error, or for an ``oracle`` scheduler.
    """

    time_s: float
    round_index: int
    round_s: float
    topology: Topology
    catalogue: Mapping[str, ModelProfile]
    perf: PerformanceModel  # the predictor (the true model for an oracle scheduler)
    jobs: list[Job]
    progress: np.ndarray  # samples done
    remaining: np.ndarray  # samples left, as predicted (true for an oracle scheduler)
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

    def permuted(self, order: list[int]) -> ClusterView:
        """The same snapshot with its jobs (and every per-job array) in the
        order ``order`` (a permutation of the job indices); the cluster's
        arrays are shared. ``self`` when the order is the identity."""
        if len(order) != len(self.jobs) or sorted(order) != list(range(len(self.jobs))):
            raise ValueError(f"permuted: expected a permutation of 0..{len(self.jobs) - 1}")
        if order == list(range(len(order))):
            return self
        ix = np.asarray(order, dtype=np.int64)
        return dataclasses.replace(
            self, jobs=[self.jobs[k] for k in order], placements=[self.placements[k] for k in order],
            progress=self.progress[ix], remaining=self.remaining[ix], attained_gpu_s=self.attained_gpu_s[ix],
            running_s=self.running_s[ix], restarts=self.restarts[ix], speed=self.speed[ix],
            batch_sizes=self.batch_sizes[ix], _index={},
        )


@dataclass
class Decision:
    """The placement of every job that runs until the next decision point
    (absent: the job waits, or is preempted); optionally, per job, a batch
    size (for policies that tune it), an architecture (``"ps"`` or
    ``"allreduce"``) and a mode (``"sync"`` or ``"async"``), only for jobs
    that leave them open (``Job.arch_open``/``mode_open``). A job not named in
    ``arch``/``mode`` keeps its current effective value. Changing a running
    job's placement, batch size, architecture or mode restarts it.

    ``recheck_s``: under ``"events"`` decision points, ask again at the first
    round boundary at or after this time even if no job arrives or finishes
    (a policy whose decision also moves with time, e.g. Tiresias' queue
    demotions, is then asked only when it can change). None: at the next
    event. Ignored under ``"round"`` and ``"every"``."""

    placements: dict[int, Placement] = field(default_factory=dict)
    batch_sizes: dict[int, int] = field(default_factory=dict)
    arch: dict[int, str] = field(default_factory=dict)
    mode: dict[int, str] = field(default_factory=dict)
    recheck_s: float | None = None


class InvalidDecisionError(ValueError):
    """A scheduler returned a decision the cluster cannot carry out."""


class Scheduler(ABC):
    """Reads a ``ClusterView``, returns a ``Decision``.

    Attributes the engine reads:

    - ``event_driven``: the decision only changes when a job arrives or
      finishes, or at the time a decision names in ``Decision.recheck_s``,
      so the engine may ask only then (``decision_points`` None means
      ``"events"`` when this is true, ``"round"`` otherwise).
    - ``decision_points`` / ``decision_every``: when to ask (see
      ``DecisionPoints``); a scenario's ``sim.decision_points`` overrides it.
    - ``max_tasks_per_gpu``: most workers (of any jobs) a decision may put on
      one GPU (time-slicing).
    - ``oracle``: the scheduler is given the true remaining work and the true
      performance model instead of the predictor's.
    - ``reads_work``: it decides on the predicted remaining work
      (``ClusterView.remaining``), which a predictor without error (no
      ``sim.predictor.work_noise``, the default) makes the truth: an oracle's
      knowledge then, and reported so (``hrlsched evaluate``).
    - ``sees_future``: it plans on a copy of the running simulation
      (``bind``), so it knows future arrivals and true speeds: an oracle
      (``lookahead``).
    """

    name: str = "scheduler"
    event_driven: bool = False
    decision_points: DecisionPoints | None = None
    decision_every: int = 1
    max_tasks_per_gpu: int = 1
    oracle: bool = False
    reads_work: bool = False
    sees_future: bool = False

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:  # noqa: B027
        """Called once before a run."""

    def bind(self, simulation: object) -> None:  # noqa: B027
        """Called after ``reset`` with the ``Simulation`` the run steps: only a
        scheduler that ``sees_future`` reads it (to copy it and try decisions
        forward); the others ignore it."""

    @abstractmethod
    def decide(self, view: ClusterView) -> Decision: ...

    def points(self) -> tuple[DecisionPoints, int]:
        """When this scheduler wants to be asked: (mode, k)."""
        if self.decision_points is not None:
            return self.decision_points, int(self.decision_every)
        return ("events" if self.event_driven else "round"), 1


def effective_job(job: Job, arch: str, mode: str) -> Job:
    """``job`` with a chosen architecture and mode (a PS job then requests at
    least one PS). The same object when nothing changes."""
    if arch == job.arch and mode == job.mode:
        return job
    ps = max(job.requested_ps, 1) if arch == "ps" else job.requested_ps
    return dataclasses.replace(job, arch=arch, mode=mode, requested_ps=ps)  # type: ignore[arg-type]
