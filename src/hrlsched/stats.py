"""Small statistics every table of the project shares."""

from __future__ import annotations

import numpy as np


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (nan with one value)."""
    from scipy import stats

    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    if v.size == 1:
        return float(v[0]), float("nan")
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean()), float(half)
