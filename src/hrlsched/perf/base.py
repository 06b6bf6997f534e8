"""The performance-model contract: a pure function from (jobs, placements,
topology) to speeds. The simulator, the policies that predict (Optimus,
topology-aware placement) and the RL environments all go through it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.core.catalogue import ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.core.sizing import WorkSizer
from hrlsched.perf.asynchrony import (
    DEFAULT_STALENESS_PENALTY,
    async_efficiency,
    check_staleness_penalty,
)


class PerformanceModel(ABC):
    """Speeds, in training samples per second, of running jobs.

    ``speeds`` is joint: the speed of one job may depend on where every other
    job runs (shared links, shared GPUs, shared sockets). Implementations must
    be deterministic and free of side effects other than caches.
    """

    name: str = "base"
    # ``isolated_speeds`` gives exactly ``alone_speed``'s numbers (so that the
    # missing ones of ``alone_speeds`` are computed together).
    isolated_is_alone: bool = False
    # A job's predictions depend on it only through its model, architecture,
    # mode and batch size (the premise of ``alone_speed``'s cache), so callers
    # may share them between jobs of one model; False for a per-job predictor.
    per_model: bool = True
    # Most entries a per-placement cache holds before it is dropped: a long
    # training run keeps meeting new placements without end (the peak memory
    # of ``benchmarks/env_speed.py --episodes 500 --workloads 4``), and dropping
    # a cache changes no figure, it only costs rebuilding what is asked for again.
    cache_entries: int = 8192

    def __init__(
        self,
        topology: Topology,
        catalogue: Mapping[str, ModelProfile],
        staleness_penalty: float = DEFAULT_STALENESS_PENALTY,
    ) -> None:
        self.topology = topology
        self.catalogue = catalogue
        # Efficiency lost per unit of staleness by an async job (perf.asynchrony).
        self.staleness_penalty = check_staleness_penalty(staleness_penalty)
        self._alone_cache: dict[tuple, float] = {}
        self._compact: dict[tuple[int, int], Placement] = {}

    def profile(self, job: Job) -> ModelProfile:
        return get_profile(job.model, self.catalogue)  # no copy: called per job, many times a round

    def _bound_caches(self) -> None:
        """Drop the per-placement caches past ``cache_entries`` (called where they may grow)."""
        if len(self._alone_cache) > self.cache_entries:
            self._alone_cache.clear()

    @abstractmethod
    def speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        """Samples/s of each job, given the placements of all of them."""

    # True when efficiency() depends on progress: the engine then refreshes
    # progress rates every round.
    progress_dependent: bool = False
    # False when some placements have no speed (a measured backend's tables
    # end): ``speeds`` raises ValueError there, and schedulers must avoid them.
    prices_everything: bool = True

    def efficiency(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray,
        progress: np.ndarray,
    ) -> np.ndarray:
        """Statistical efficiency of each job: progress per sample processed
        (progress counts samples at full efficiency). 1 for a synchronous
        job; an asynchronous one loses to staleness as its workers grow
        (``perf.asynchrony``). A backend that models the gradient noise scale
        overrides this."""
        n = len(jobs)
        if not any(j.mode == "async" for j in jobs):  # (Python: the usual all-sync case, with no numpy pass)
            return np.ones(n)
        asyn = np.fromiter((j.mode == "async" for j in jobs), dtype=bool, count=n)
        w = np.fromiter((p.n_workers for p in placements), dtype=np.int64, count=n)
        return np.where(asyn, async_efficiency(w, self.staleness_penalty), 1.0)

    def efficiency_until(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray,
        progress: np.ndarray,
    ) -> np.ndarray:
        """Per job, a progress below which ``efficiency`` stays what it is at
        ``progress`` (same placement and batch size), so that the engine may
        advance several rounds in one go. inf when efficiency does not move
        with progress; ``progress`` itself (it may move at once: the engine
        goes round by round) by default for a ``progress_dependent`` backend."""
        if not self.progress_dependent:
            return np.full(len(jobs), np.inf)
        return np.array(progress, dtype=float)

    def alone_speed(self, job: Job, placement: Placement, batch_size: int | None = None) -> float:
        """Speed of the job at this placement with no other job in the cluster."""
        bs = job.batch_size if batch_size is None else int(batch_size)
        key = (job.model, job.arch, job.mode, bs, placement.canonical())
        v = self._alone_cache.get(key)
        if v is None:
            self._bound_caches()
            v = float(self.speeds([job], [placement], np.array([bs]))[0])
            self._alone_cache[key] = v
        return v

    def alone_speed_or_zero(self, job: Job, placement: Placement, batch_size: int | None = None) -> float:
        """``alone_speed``, or 0 where the backend has no speed for the
        placement (``prices_everything`` False)."""
        try:
            return self.alone_speed(job, placement, batch_size)
        except ValueError:
            if self.prices_everything:
                raise
            return 0.0

    def speed_ceiling(self, job: Job, n_workers: np.ndarray) -> np.ndarray | None:
        """An upper bound on the job's speed alone at each worker count, over
        every placement and PS count, cheap to compute; None when the backend
        has none. Lets searches over allocations (``experiments.bound``)
        skip worker counts that cannot win."""
        return None

    def speeds_apart(self, groups: Sequence[tuple[Sequence[Job], Sequence[Placement]]]) -> list[np.ndarray]:
        """``speeds`` of each group of (jobs, placements), each group as if
        alone on the cluster (its jobs at their own batch sizes); a backend
        may solve them all in one pass."""
        return [self.speeds(jobs, pls) for jobs, pls in groups]

    def speeds_beside(self, others: tuple[Sequence[Job], Sequence[Placement]], job: Job,
                      placements: Sequence[Placement]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The speeds of the jobs ``others`` (at their placements) alone, and, for each of
        ``placements``, those of the others with ``job`` there (the job's last): each group apart
        (``speeds_apart``), every job at its own batch size. A backend may skip the placements
        that share nothing with the others (``agent.placement_choice`` prices a job's candidate
        placements among its neighbours with it)."""
        oj, op = others
        sps = self.speeds_apart([(oj, op), *(([*oj, job], [*op, c]) for c in placements)])
        return sps[0], sps[1:]

    def speeds_and_alone(self, jobs: Sequence[Job], placements: Sequence[Placement], batch_sizes: np.ndarray,
                         alone: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``speeds`` of the jobs, and ``alone_speeds`` of those at positions
        ``alone`` (the engine's jobs that have just moved); a backend may
        solve both in one pass."""
        sp = self.speeds(jobs, placements, batch_sizes)
        ix = list(alone)
        return sp, self.alone_speeds([jobs[i] for i in ix], [placements[i] for i in ix], np.asarray(batch_sizes)[ix])

    def alone_speeds(self, jobs: Sequence[Job], placements: Sequence[Placement], batch_sizes: np.ndarray) -> np.ndarray:
        """``alone_speed`` of many (job, placement, batch size), through the
        same cache; the missing ones in one ``isolated_speeds`` call where the
        backend's ``isolated_is_alone``."""
        out = np.empty(len(jobs))
        if not self.isolated_is_alone:
            for i, (j, pl, b) in enumerate(zip(jobs, placements, np.asarray(batch_sizes).tolist())):
                out[i] = self.alone_speed(j, pl, int(b))
            return out
        self._bound_caches()
        miss: dict[tuple, list[int]] = {}
        for i, (j, pl, b) in enumerate(zip(jobs, placements, np.asarray(batch_sizes).tolist())):
            key = (j.model, j.arch, j.mode, int(b), pl.canonical())
            v = self._alone_cache.get(key)
            if v is None:
                miss.setdefault(key, []).append(i)
            else:
                out[i] = v
        if miss:
            first = [ix[0] for ix in miss.values()]
            sp = self.isolated_speeds([jobs[i] for i in first], [placements[i] for i in first],
                                      np.array([int(batch_sizes[i]) for i in first], dtype=np.int64))
            for (key, ix), v in zip(miss.items(), sp.tolist()):
                self._alone_cache[key] = v
                out[ix] = v
        return out

    def isolated_speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        """``alone_speed`` of many (job, placement) pairs, each alone on the
        cluster (the pairs do not see each other). Backends vectorise it."""
        batch = [j.batch_size for j in jobs] if batch_sizes is None else [int(b) for b in batch_sizes]
        return np.array([self.alone_speed(j, pl, b) for j, pl, b in zip(jobs, placements, batch)], dtype=float)

    def isolated_speed(self, job: Job, n_workers: int, n_ps: int, batch_size: int | None = None) -> float:
        """Speed alone on an interference-free, consolidated placement: workers
        packed from GPU 0 on (one switch, one socket, one server where they
        fit), PSs on the workers' first socket(s)."""
        placement = self.compact_placement(n_workers, n_ps if job.arch == "ps" else 0)
        return self.alone_speed(job, placement, batch_size)

    def isolated_progress_rate(self, job: Job) -> float:
        """Progress per second alone at the job's request, consolidated: the
        isolated speed times, for an async job, its staleness efficiency
        (a sync job's efficiency is taken as 1, as the workload builders
        always did)."""
        speed = self.isolated_speed(job, job.requested_gpus, job.num_ps_requested)
        if job.mode == "async":
            speed *= float(async_efficiency(np.array([job.requested_gpus]), self.staleness_penalty)[0])
        return speed

    def measured_work(self) -> dict[str, Callable[[int], float]]:
        """Model -> samples to completion at a batch size, for backends that
        replay measured applications; none here."""
        return {}

    def work_sizer(self) -> WorkSizer:
        """What the workload builders need from this model (``core.sizing``)."""
        return WorkSizer(self.catalogue, self.topology.n_gpus, self.isolated_progress_rate, self.measured_work())

    def compact_placement(self, n_workers: int, n_ps: int) -> Placement:
        key = (int(n_workers), int(n_ps))
        pl = self._compact.get(key)  # made once per (workers, PSs)
        if pl is None:
            pl = self._compact[key] = self._compact_placement(*key)
        return pl

    def _compact_placement(self, n_workers: int, n_ps: int) -> Placement:
        topo = self.topology
        if n_workers > topo.n_gpus:
            raise ValueError(f"{n_workers} workers do not fit in a cluster of {topo.n_gpus} GPUs")
        gpus = np.arange(n_workers)
        sockets = np.unique(topo.gpu_socket[gpus])
        ps = sockets[np.arange(n_ps) % len(sockets)] if n_ps else np.array([], dtype=int)
        return Placement.of(gpus, ps)


def theta_speed_ceiling(job: Job, profile: ModelProfile, n_workers: np.ndarray, gpu_speed_max: float) -> np.ndarray:
    """Speed ceiling of a backend whose iteration takes at least the Optimus
    terms without communication: theta0 * local batch / fastest GPU + theta1
    + theta3 * w + theta4 (at least one PS for a PS job; none counted for
    all-reduce); interference, time-sharing, the straggler wait and
    communication only add to it. Samples per iteration: the global batch
    (sync) or each worker's batch times w (async)."""
    th = profile.theta
    w = np.asarray(n_workers, dtype=float)
    b = float(job.batch_size)
    local = b / w if job.mode == "sync" else np.full_like(w, b)
    t = th[0] * local / gpu_speed_max + th[1] + th[3] * w + (th[4] if job.arch == "ps" else 0.0)
    return (b if job.mode == "sync" else w * b) / t


def gpu_share_counts(placements: Sequence[Placement], n_gpus: int) -> np.ndarray:
    """Number of workers (of all jobs) on each GPU."""
    if not placements:
        return np.zeros(n_gpus, dtype=np.int64)
    flat = np.fromiter((g for p in placements for g in p.gpus), dtype=np.int64)
    return np.bincount(flat, minlength=n_gpus)


def per_job_max(values: np.ndarray, placements: Sequence[Placement]) -> np.ndarray:
    """max over each job's GPUs of ``values[gpu]``, vectorised with reduceat."""
    lens = np.fromiter((len(p.gpus) for p in placements), dtype=np.int64, count=len(placements))
    flat = np.fromiter((g for p in placements for g in p.gpus), dtype=np.int64, count=int(lens.sum()))
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    return np.maximum.reduceat(values[flat], starts)


def per_job_min(values: np.ndarray, placements: Sequence[Placement]) -> np.ndarray:
    lens = np.fromiter((len(p.gpus) for p in placements), dtype=np.int64, count=len(placements))
    flat = np.fromiter((g for p in placements for g in p.gpus), dtype=np.int64, count=int(lens.sum()))
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    return np.minimum.reduceat(values[flat], starts)
