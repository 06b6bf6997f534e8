"""Training-loss curves: the signal Optimus-style schedulers observe.

The simulator counts work in samples; a job is done when its samples are.
For policies that predict convergence from the loss (Optimus), each job gets
a ground-truth curve of the form Optimus fits, l(k) = 1 / (b0 k + b1) + b2
over steps k, set so that it converges (l(k) - b2 <= ``DELTA``) exactly when
its samples are done; policies see it with multiplicative noise. b1 and b2
are drawn per job from a fixed stream, so runs are reproducible."""

from __future__ import annotations

import numpy as np

from hrlsched.core.job import Job

DELTA = 0.02
NOISE = 0.02


def true_curve(job: Job) -> tuple[float, float, float]:
    rng = np.random.default_rng([job.job_id, 0xC0DE])
    b1 = float(rng.uniform(0.5, 2.0))
    b2 = float(rng.uniform(0.05, 1.0))
    steps = max(job.total_samples / job.batch_size, 1.0)
    b0 = (1.0 / DELTA - b1) / steps
    return b0, b1, b2


def observed_loss(job: Job, step: float, rng: np.random.Generator) -> float:
    return loss_on_curve(true_curve(job), step, rng)


def loss_on_curve(curve: tuple[float, float, float], step: float, rng: np.random.Generator) -> float:
    """``observed_loss`` given the job's ``true_curve`` (callers that observe
    often keep the curve)."""
    b0, b1, b2 = curve
    return (1.0 / (b0 * step + b1) + b2) * (1.0 + NOISE * rng.standard_normal())


def fit_curve(steps: np.ndarray, losses: np.ndarray) -> tuple[float, float, float] | None:
    """(b0, b1, b2) >= 0 by least squares: for each b2 on a grid below the
    smallest loss, 1 / (l - b2) is linear in k (all grid points at once)."""
    if steps.size < 3 or np.ptp(steps) <= 0:
        return None
    b2 = np.linspace(0.0, float(losses.min()) * 0.98, 40)[:, None]
    y = 1.0 / np.maximum(losses[None, :] - b2, 1e-9)  # (grid, points)
    k = steps[None, :]
    km, ym = k.mean(), y.mean(axis=1, keepdims=True)
    b0 = ((k - km) * (y - ym)).sum(axis=1) / ((k - km) ** 2).sum()
    b1 = ym[:, 0] - b0 * km
    pred = 1.0 / np.maximum(b0[:, None] * k + b1[:, None], 1e-9) + b2
    err = np.where(b0 > 0, ((pred - losses[None, :]) ** 2).sum(axis=1), np.inf)
    i = int(np.argmin(err))
    return None if not np.isfinite(err[i]) else (float(b0[i]), float(b1[i]), float(b2[i, 0]))


def steps_to_converge(b0: float, b1: float) -> float:
    return max((1.0 / DELTA - b1) / b0, 0.0)
