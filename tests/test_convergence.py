"""The batched loss-curve fit gives exactly the one-by-one fit (Optimus's
allocations depend on it bit for bit)."""

from __future__ import annotations

import numpy as np

from hrlsched.workload import convergence as C


def test_fit_curves_equal_fit_curve_row_by_row() -> None:
    rng = np.random.default_rng(0)
    for m in (1, 2, 3, 5, 8, 9, 17, 64, 129, 300):
        for n in (1, 2, 7):
            steps = np.maximum.accumulate(np.sort(rng.uniform(0, 10 ** rng.uniform(1, 6), (n, m)), axis=1), axis=1)
            steps[0] = 3.0  # one distinct step: no fit
            b0, b1 = 10 ** rng.uniform(-6, -3, (n, 1)), rng.uniform(0.5, 2.0, (n, 1))
            losses = (1 / (b0 * steps + b1) + rng.uniform(0, 1, (n, 1))) * (1 + 0.02 * rng.standard_normal((n, m)))
            losses[-1] -= losses[-1].min()  # a zero smallest loss: linspace's own path
            assert C.fit_curves(steps, losses) == [C.fit_curve(s, y) for s, y in zip(steps, losses)]


def test_grid_is_linspace() -> None:
    for stop in (0.0, 1.0, 0.37, 1e-300, 5e-324, 123.456, -2.0):
        want = np.linspace(0.0, stop, 40)[:, None]
        got = C._grid(stop)
        assert np.array_equal(want, got) and np.array_equal(np.signbit(want), np.signbit(got))
