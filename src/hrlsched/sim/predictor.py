"""What a policy may know: a predictor of speeds apart from the simulator's truth.

Policies read ``ClusterView.perf`` to predict speeds. By default it is the
simulator's own model (perfect prediction); a scenario may give another
backend (``predictor.backend``) and/or a prediction error
(``predictor.noise``): every predicted speed of a job is multiplied by a
per-job log-normal factor exp(sigma * N(0, 1)), drawn from the episode's seed,
the same for all of the job's placements (a systematic error, as a profile
measured on other hardware or a mis-fitted model would make). The error of
predicted remaining work (``predictor.work_noise``) is applied by the engine
to ``ClusterView.remaining``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel


def lognormal_factors(sigma: float, n: int, seed: int, stream: int) -> np.ndarray:
    """n per-job factors exp(sigma * N(0, 1)) from their own random stream."""
    return np.exp(sigma * np.random.default_rng([seed, stream]).standard_normal(n))


class NoisyPredictor(PerformanceModel):
    """``base``'s predictions times a fixed per-job factor (``factor[job_id]``)."""

    per_model = False  # two jobs of one model have their own factors

    def __init__(self, base: PerformanceModel, factor: dict[int, float]) -> None:
        super().__init__(base.topology, base.catalogue)
        self.base = base
        self.factor = factor
        self.name = f"{base.name}+noise"
        self.progress_dependent = base.progress_dependent

    def _f(self, jobs: Sequence[Job]) -> np.ndarray:
        return np.fromiter((self.factor.get(j.job_id, 1.0) for j in jobs), dtype=float, count=len(jobs))

    def speeds(self, jobs: Sequence[Job], placements: Sequence[Placement],
               batch_sizes: np.ndarray | None = None) -> np.ndarray:
        return self.base.speeds(jobs, placements, batch_sizes) * self._f(jobs)

    def speeds_apart(self, groups: Sequence[tuple[Sequence[Job], Sequence[Placement]]]) -> list[np.ndarray]:
        return [sp * self._f(jobs) for sp, (jobs, _) in zip(self.base.speeds_apart(groups), groups)]

    def speeds_beside(self, others: tuple[Sequence[Job], Sequence[Placement]], job: Job,
                      placements: Sequence[Placement]) -> tuple[np.ndarray, list[np.ndarray]]:
        base, sps = self.base.speeds_beside(others, job, placements)  # (the base's shortcuts kept)
        f = self._f(others[0])
        fj = np.append(f, self.factor.get(job.job_id, 1.0))
        return base * f, [sp * fj for sp in sps]

    def efficiency(self, jobs: Sequence[Job], placements: Sequence[Placement], batch_sizes: np.ndarray,
                   progress: np.ndarray) -> np.ndarray:
        return self.base.efficiency(jobs, placements, batch_sizes, progress)

    def efficiency_until(self, jobs: Sequence[Job], placements: Sequence[Placement], batch_sizes: np.ndarray,
                         progress: np.ndarray) -> np.ndarray:
        return self.base.efficiency_until(jobs, placements, batch_sizes, progress)

    def alone_speed(self, job: Job, placement: Placement, batch_size: int | None = None) -> float:
        return self.base.alone_speed(job, placement, batch_size) * self.factor.get(job.job_id, 1.0)

    def __getattr__(self, name: str) -> object:
        # Backend-specific helpers (e.g. a fitted curve) come from the base model.
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)
