"""Plots a report draws itself, where the folder has none: drawn in memory
(a temporary folder, removed), never written into the folder reported."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np


def png_of(draw: Callable[[Path], None]) -> bytes:
    """The PNG that ``draw(path)`` writes."""
    with tempfile.TemporaryDirectory(prefix="hrlsched-report-") as d:
        path = Path(d) / "plot.png"
        draw(path)
        return path.read_bytes()


def run_plots(jct_s: np.ndarray, rounds: dict[str, np.ndarray], n_gpus: int, name: str) -> list[tuple[bytes, str]]:
    """A run's JCT CDF and timeline, as ``hrlsched simulate`` draws them."""
    from hrlsched.sim import plots

    cdf = f"{name}: job completion times (CDF)"
    timeline = f"{name}: GPU utilisation and queue over time"
    return [(png_of(lambda p: plots.plot_jct_cdf({name: jct_s}, p, title=cdf)), cdf),
            (png_of(lambda p: plots.plot_timeline({name: rounds}, n_gpus, p, title=timeline)), timeline)]


def jct_bars(rows: dict[str, tuple[float, float]], title: str, bound_h: float | None = None) -> bytes:
    """``sim.plots.plot_jct_bars``: average JCT per row (hours, with its 95% half-width)."""
    from hrlsched.sim import plots

    return png_of(lambda p: plots.plot_jct_bars(rows, p, title=title, bound_h=bound_h))
