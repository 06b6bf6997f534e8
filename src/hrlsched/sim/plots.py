"""PNG plots of a run: JCT CDF, GPU utilisation and queue over time."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from hrlsched.io import atomic_write

# Fixed metadata keeps PNGs byte-identical across runs of the same seed.
_META = {"Software": None}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(i: int) -> dict[str, object]:
    """Distinct colour and line style for up to 30 lines."""
    return {"color": f"C{i % 10}", "linestyle": ("-", "--", ":")[(i // 10) % 3]}


def _save(fig, path: Path) -> None:
    atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=110, metadata=_META))


def plot_jct_cdf(jcts: Mapping[str, np.ndarray], path: Path, title: str = "JCT CDF") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (name, v) in enumerate(jcts.items()):
        v = np.sort(np.asarray(v, dtype=float)[~np.isnan(v)]) / 3600.0
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=name, **_style(i))
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of jobs (CDF)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_timeline(
    series: Mapping[str, Mapping[str, np.ndarray]], n_gpus: int, path: Path, title: str = "GPU utilisation and queue"
) -> None:
    """GPU utilisation and jobs queued over time, one line per run."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    fig.suptitle(title, fontsize=10)
    for i, (name, r) in enumerate(series.items()):
        h = np.asarray(r["time_s"]) / 3600.0
        a1.plot(h, np.asarray(r["gpus_busy"]) / n_gpus, lw=0.8, label=name, **_style(i))
        a2.plot(h, r["jobs_queued"], lw=0.8, label=name, **_style(i))
    a1.set_ylabel(f"GPU utilisation\n(share of {n_gpus} GPUs busy)")
    a1.set_ylim(0, 1.05)
    a2.set_ylabel("jobs queued (count)")
    a2.set_xlabel("time (h)")
    for a in (a1, a2):
        a.grid(alpha=0.3)
    a1.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_jct_bars(rows: Mapping[str, tuple[float, float]], path: Path, title: str = "Average JCT",
                  bound_h: float | None = None) -> None:
    """Average JCT per row, ``name -> (mean, 95% half-width)`` in hours,
    fastest at the top, and the lower bound as a dashed line."""
    plt = _plt()
    names = sorted(rows, key=lambda n: -rows[n][0])
    fig, ax = plt.subplots(figsize=(7, max(2.4, 1.2 + 0.3 * len(names))))
    y = np.arange(len(names))
    err = np.nan_to_num(np.array([rows[n][1] for n in names], dtype=float))
    ax.barh(y, [rows[n][0] for n in names], xerr=err, color="C0", alpha=0.8, capsize=3)
    ax.set_yticks(y, names, fontsize=8)
    label = "average JCT (h), mean ± 95% interval over seeds"
    if bound_h is not None and np.isfinite(bound_h):
        ax.axvline(bound_h, color="C3", linestyle="--", lw=1)
        label += f"\ndashed: the lower bound, {bound_h:.3g} h"
    ax.set_xlabel(label)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
