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
    if steps.size < 3 or steps.max() - steps.min() <= 0:
        return None
    b2 = _grid(float(losses.min()) * 0.98)
    y = 1.0 / np.maximum(losses[None, :] - b2, 1e-9)  # (grid, points)
    k = steps[None, :]
    km, ym = k.mean(), y.mean(axis=1, keepdims=True)
    b0 = ((k - km) * (y - ym)).sum(axis=1) / ((k - km) ** 2).sum()
    b1 = ym[:, 0] - b0 * km
    pred = 1.0 / np.maximum(b0[:, None] * k + b1[:, None], 1e-9) + b2
    err = np.where(b0 > 0, ((pred - losses[None, :]) ** 2).sum(axis=1), np.inf)
    i = int(np.argmin(err))
    return None if not np.isfinite(err[i]) else (float(b0[i]), float(b1[i]), float(b2[i, 0]))


def fit_curves(steps: np.ndarray, losses: np.ndarray) -> list[tuple[float, float, float] | None]:
    """``fit_curve`` of each row of ``steps`` and ``losses`` (J x m arrays,
    as many points each): the same numbers (the same operations, each
    reduction along a row as ``fit_curve`` makes it), in one go."""
    n, m = steps.shape
    if m < 3:
        return [None] * n
    ok = (steps.max(axis=1) - steps.min(axis=1) > 0).tolist()
    stop = losses.min(axis=1) * 0.98
    step = stop / 39
    odd = ~(step != 0) | (step != step)  # a zero or NaN step: linspace's own path
    b2 = _STEPS[None, :, :] * step[:, None, None]  # (J, grid, 1)
    b2 += 0.0
    b2[:, -1, 0] = stop
    y = 1.0 / np.maximum(losses[:, None, :] - b2, 1e-9)  # (J, grid, points)
    k = steps[:, None, :]
    km, ym = steps.mean(axis=1)[:, None, None], y.mean(axis=2, keepdims=True)
    d = k - km
    with np.errstate(invalid="ignore", divide="ignore"):  # rows with one distinct step: not used
        b0 = (d * (y - ym)).sum(axis=2) / (d ** 2).sum(axis=2)  # (J, grid)
        b1 = ym[:, :, 0] - b0 * km[:, :, 0]
        pred = 1.0 / np.maximum(b0[:, :, None] * k + b1[:, :, None], 1e-9) + b2
    err = np.where(b0 > 0, ((pred - losses[:, None, :]) ** 2).sum(axis=2), np.inf)
    best = err.argmin(axis=1).tolist()
    out: list[tuple[float, float, float] | None] = []
    for j, i in enumerate(best):
        if not ok[j]:
            out.append(None)
        elif odd[j]:
            out.append(fit_curve(steps[j], losses[j]))
        else:
            out.append(None if not np.isfinite(err[j, i]) else (float(b0[j, i]), float(b1[j, i]), float(b2[j, i, 0])))
    return out


_STEPS = np.arange(40, dtype=float).reshape(-1, 1)


def _grid(stop: float) -> np.ndarray:
    """``np.linspace(0.0, stop, 40)[:, None]``, the same numbers, without its overhead."""
    step = stop / 39
    if step == 0 or step != step:
        return np.linspace(0.0, stop, 40)[:, None]
    y = _STEPS * step
    y += 0.0
    y[-1] = stop
    return y


def steps_to_converge(b0: float, b1: float) -> float:
    return max((1.0 / DELTA - b1) / b0, 0.0)
