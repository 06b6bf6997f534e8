"""Figures as a person reads them (files keep seconds)."""

from __future__ import annotations

import math


def format_duration(seconds: float) -> str:
    """``5130`` -> ``1 h 25 min``; under a minute in seconds, days past 48 h."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = float(seconds)
    if s < 60:
        return f"{s:.0f} s"
    minutes = int(round(s / 60))
    if minutes < 60:
        return f"{minutes} min"
    h, m = divmod(minutes, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    d, h = divmod(h, 24)
    return f"{d} d {h} h"


def format_metric(key: str, value: object) -> str:
    """A summary.json value for a table: durations (keys ending ``_s``) as
    hours and minutes, shares as percentages, other floats to 3 digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key.endswith("_s"):
        return format_duration(float(value))
    if key == "gpu_util_mean":
        return f"{100 * float(value):.1f}%"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
