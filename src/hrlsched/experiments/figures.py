"""The plots and the summary table of an experiment (``experiments.experiment``),
from its rows (``results.csv``) and, on its first seed, each job's JCT and
floor. Every number is a mean over the seeds with its 95% t-interval."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.experiments.compare import interval
from hrlsched.sim.plots import _plt, _save, _style

HOUR = 3600.0
# what the tables and axes call each figure, and its scale
LABELS = {"avg_jct_s": ("avg JCT (h)", HOUR), "p95_jct_s": ("p95 JCT (h)", HOUR), "p99_jct_s": ("p99 JCT (h)", HOUR),
          "makespan_s": ("makespan (h)", HOUR), "gpu_util_mean": ("GPU util", 1.0),
          "restarts_total": ("restarts", 1.0), "max_ftf": ("max FTF", 1.0), "delay_s": ("delay (job-h)", HOUR),
          "wall_s": ("sim wall (s)", 1.0), "decide_mean_ms": ("decision (ms)", 1.0),
          "decide_max_ms": ("slowest decision (ms)", 1.0), "peak_rss_mb": ("peak memory (MB)", 1.0),
          "lower_bound_avg_jct_s": ("lower bound (h)", HOUR)}


def _finish(fig: Any, out: Path, name: str) -> str:
    """Lay ``fig`` out, write it to ``out/name`` (whole) and close it; its name."""
    fig.tight_layout()
    _save(fig, out / name)
    _plt().close(fig)
    return name


def _mark(info: str) -> str:
    """A policy's mark in legends and tables: ``(oracle)`` where it is given
    the truth, ``*`` where it reads the predicted work (the truth where the
    predictor is exact)."""
    return {"truth": " (oracle)", "predicted work": "*", "exact predicted work": "*"}.get(info, "")


def _grouped(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, Any], list[dict[str, Any]]]:
    g: dict[tuple[str, str, Any], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        g[(r["factor"], r["policy"], r["value"])].append(r)
    return g


def _policies(rows: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["policy"] for r in rows))


def _values(rows: Sequence[dict[str, Any]], factor: str) -> list[Any]:
    return list(dict.fromkeys(r["value"] for r in rows if r["factor"] == factor))


def _paired_ratio(a: list[dict[str, Any]], b: list[dict[str, Any]], metric: str) -> tuple[float, float]:
    """Mean ratio a/b over the seeds both have, with its 95% interval."""
    bs = {r["seed"]: r[metric] for r in b}
    ratios = [r[metric] / bs[r["seed"]] for r in a if r[metric] is not None and bs.get(r["seed"])]
    return interval(ratios)


def plot_sweep(exp: Any, rows: Sequence[dict[str, Any]], out: Path, factor: Any,
               policies: list[str] | None = None, name: str | None = None) -> str:
    """Per metric of the experiment: its mean against the factor's value, one
    line per policy, and (where the factor has a reference value) each
    policy's value over its own at the reference, paired by seed."""
    plt = _plt()
    g = _grouped(rows)
    pols = policies or _policies(rows)
    vals = _values(rows, factor.name)
    # numbers on a numeric axis; names (or a value such as "none") side by side, unjoined
    numeric = not factor.categorical and all(isinstance(v, (int, float)) for v in vals)
    xs = np.array([float(v) for v in vals]) if numeric else np.arange(len(vals), dtype=float)
    metrics = list(exp.metrics)
    ref = factor.reference
    cols = 2 if ref is not None else 1
    fig, axes = plt.subplots(len(metrics), cols, figsize=(5.2 * cols, 3.4 * len(metrics)), squeeze=False)
    info = {r["policy"]: r["information"] for r in rows if r["factor"] == factor.name}
    n_seeds = len({r["seed"] for r in rows})
    for k, m in enumerate(metrics):
        label, scale = LABELS[m]
        shown: list[list[float]] = [[], []]  # the means drawn, for the axes' ranges
        for i, p in enumerate(pols):
            st = _style(i)
            x = xs
            if not numeric:
                st["linestyle"] = "none"
                x = xs + (i - (len(pols) - 1) / 2) * 0.6 / len(pols)
            ms = [interval([r[m] for r in g[(factor.name, p, v)] if r[m] is not None]) for v in vals]
            y = np.array([a for a, _ in ms]) / scale
            e = np.nan_to_num(np.array([h for _, h in ms]) / scale)
            shown[0] += list(y)
            axes[k, 0].errorbar(x, y, yerr=e, marker="o", ms=3, lw=1, capsize=2, label=p + _mark(info.get(p, "")), **st)
            if cols == 2:
                base = g[(factor.name, p, ref)]
                rs = [_paired_ratio(g[(factor.name, p, v)], base, m) for v in vals]
                shown[1] += [a for a, _ in rs]
                axes[k, 1].errorbar(x, [a for a, _ in rs], yerr=np.nan_to_num([h for _, h in rs]), marker="o", ms=3,
                                    lw=1, capsize=2, **st)
        axes[k, 0].set_ylabel(label)
        if cols == 2:
            axes[k, 1].axhline(1.0, color="grey", lw=0.6)
            axes[k, 1].set_ylabel(f"{label.split(' (')[0]} / at {ref}")
        for a, ys in zip(axes[k], shown):
            # the range of the means: a few seeds' intervals (t with 1 degree of freedom is 12.7) would hide them
            ys = [y for y in ys if y == y]
            if ys:
                lo, hi = min(ys), max(ys)
                pad = 0.08 * (hi - lo) or 0.05 * abs(hi) or 0.05
                a.set_ylim(lo - pad, hi + pad)
        for a in axes[k]:
            a.set_xlabel(factor.title)
            a.grid(alpha=0.3)
            if not numeric:
                a.set_xticks(xs, [str(v) for v in vals])
    axes[0, 0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"{exp.name}: {factor.title} (mean over {n_seeds} seed{'s' if n_seeds > 1 else ''}, bars: 95% "
                 "interval; right: each policy against itself at the reference, paired by seed)", fontsize=9)
    return _finish(fig, out, f"{name or exp.name + '-' + factor.name}.png")


def plot_table(exp: Any, rows: Sequence[dict[str, Any]], out: Path, factor: Any) -> str:
    """A categorical factor (``main``'s scenarios): each policy's mean average
    JCT over the best policy's on that setting, as a heat map with the ratios
    written in."""
    plt = _plt()
    g = _grouped(rows)
    pols = _policies(rows)
    vals = _values(rows, factor.name)
    info = {r["policy"]: r["information"] for r in rows}
    means = np.array([[interval([r["avg_jct_s"] for r in g[(factor.name, p, v)] if r["avg_jct_s"] is not None])[0]
                       for v in vals] for p in pols])
    ratio = means / np.nanmin(means, axis=0, keepdims=True)
    fig, ax = plt.subplots(figsize=(1.5 + 1.3 * len(vals), 0.8 + 0.28 * len(pols)))
    shown = np.log2(np.nan_to_num(ratio, nan=np.nanmax(ratio)))
    ax.imshow(shown, cmap="viridis_r", aspect="auto", vmin=0, vmax=max(float(np.nanmax(shown)), 1e-9))
    for i in range(len(pols)):
        for j in range(len(vals)):
            ax.text(j, i, "-" if ratio[i, j] != ratio[i, j] else f"{ratio[i, j]:.2f}", ha="center", va="center",
                    fontsize=7, color="white" if shown[i, j] > 0.6 * np.nanmax(shown) else "black")
    ax.set_xticks(range(len(vals)), [str(v) for v in vals], fontsize=8)
    ax.set_yticks(range(len(pols)), [p + _mark(info.get(p, "")) for p in pols], fontsize=7)
    ax.set_title(f"{exp.name}: average JCT over the best policy's, per {factor.title}", fontsize=9)
    return _finish(fig, out, f"{exp.name}-jct.png")


def plot_jobs(exp: Any, jobs: dict[tuple[str, str | None], dict[str, list[Any]]], out: Path, setting: str,
              policies: list[str]) -> list[str]:
    """On the first seed at ``setting``: the JCT CDF of ``policies`` and each
    job's slowdown against its lower bound (its JCT over its floor alone at
    its best allocation, ``experiments.bound``)."""
    from hrlsched.sim.plots import plot_jct_cdf

    here = {p: jobs[(setting, p)] for p in policies if (setting, p) in jobs}
    if not here:
        return []
    jcts = {p: np.array([np.nan if x is None else x for x in j["jct_s"]], dtype=float) for p, j in here.items()}
    names = [f"{exp.name}-cdf.png"]
    plot_jct_cdf(jcts, out / names[0], title=f"{exp.name}, {setting}: job completion times (CDF), first seed")
    floor = jobs.get((setting, None))
    if floor is not None:
        by_id = dict(zip(floor["job_id"], floor["floor_s"]))
        plt = _plt()
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, (p, j) in enumerate(here.items()):
            s = np.array([x / by_id[k] for k, x in zip(j["job_id"], j["jct_s"]) if x is not None])
            s = np.sort(s)
            ax.step(s, np.arange(1, s.size + 1) / s.size, where="post", label=p, **_style(i))
        ax.set_xscale("log")
        ax.set_xlabel("slowdown: JCT / the job's lower bound")
        ax.set_ylabel("fraction of jobs (CDF)")
        ax.set_title(f"{exp.name}, {setting}: per-job slowdown against the lower bound, first seed", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        names.append(_finish(fig, out, f"{exp.name}-slowdown.png"))
    return names


def plot_measures(exp: Any, rows: Sequence[dict[str, Any]], out: Path, factor: Any) -> str:
    """``scale``: per policy and setting, the simulator's wall time, the mean
    time per decision and the peak memory of the run's process."""
    plt = _plt()
    g = _grouped(rows)
    pols = _policies(rows)
    vals = _values(rows, factor.name)
    metrics = ["wall_s", "decide_mean_ms", "peak_rss_mb"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    width = 0.8 / max(len(vals), 1)
    x = np.arange(len(pols))
    for k, m in enumerate(metrics):
        for j, v in enumerate(vals):
            ms = [interval([r[m] for r in g[(factor.name, p, v)] if r[m] is not None])[0] for p in pols]
            axes[k].bar(x + (j - (len(vals) - 1) / 2) * width, ms, width, label=f"{factor.title} {v}", color=f"C{j}")
        axes[k].set_xticks(x, pols, rotation=45, ha="right", fontsize=7)
        axes[k].set_ylabel(LABELS[m][0])
        axes[k].set_yscale("log")
        axes[k].grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{exp.name}: simulator wall time, decision latency and memory per policy", fontsize=10)
    return _finish(fig, out, f"{exp.name}-measures.png")


def draw(exp: Any, rows: Sequence[dict[str, Any]], jobs: dict[tuple[str, str | None], dict[str, list[Any]]],
         out: Path, quick: bool) -> list[str]:
    """Every plot the experiment names (``Experiment.plots``); their file names."""
    names: list[str] = []
    for f in exp.factors:
        here = [r for r in rows if r["factor"] == f.name]
        if not here:
            continue
        for kind in exp.plots:
            names += PLOTS[kind](exp, here, out, f, jobs)
    return names


def _sweep(exp: Any, rows: Sequence[dict[str, Any]], out: Path, f: Any, jobs: Any) -> list[str]:
    return [plot_sweep(exp, rows, out, f)]


def _placement(exp: Any, rows: Sequence[dict[str, Any]], out: Path, f: Any, jobs: Any) -> list[str]:
    pols = [p for p in _policies(rows) if p.partition("+")[0] == "optimus" and "+" in p]
    return [plot_sweep(exp, rows, out, f, pols, name=f"{exp.name}-{f.name}-placement")] if len(pols) > 1 else []


def _main(exp: Any, rows: Sequence[dict[str, Any]], out: Path, f: Any, jobs: Any) -> list[str]:
    first = next(s for s in exp.settings() if s.factor == f.name).label
    shown = [p for p in exp.cdf_policies if p in set(_policies(rows))]
    return [plot_table(exp, rows, out, f), *plot_jobs(exp, jobs, out, first, shown)]


def _measures(exp: Any, rows: Sequence[dict[str, Any]], out: Path, f: Any, jobs: Any) -> list[str]:
    return [plot_measures(exp, rows, out, f)]


PLOTS: dict[str, Callable[..., list[str]]] = {"sweep": _sweep, "placement": _placement, "main": _main,
                                               "measures": _measures}


def _pm(vals: list[float | None], scale: float) -> str:
    v = [x for x in vals if x is not None]
    if not v:
        return "-"
    m, h = interval(v)
    digits = 2 if abs(m / scale) >= 0.1 or m == 0 else 3
    return f"{m / scale:.{digits}f}" + ("" if h != h else f" ± {h / scale:.{digits}f}")


def summary_markdown(exp: Any, rows: Sequence[dict[str, Any]], seeds: list[int], pngs: list[str]) -> str:
    """The experiment's tables as markdown: per factor, each policy's metrics
    (mean ± 95% over the seeds) at every value; the plots listed below."""
    from hrlsched.seeds import seeds_text

    g = _grouped(rows)
    info = {r["policy"]: r["information"] for r in rows}
    lines = [f"Experiment `{exp.name}`: {exp.title}. Seeds {seeds_text(seeds)}; mean ± 95% interval over the "
             "seeds. (oracle): given the true remaining work; *: reads the predictor's remaining work (the truth "
             "where the predictor has no work error, `predictor.work_noise` 0).", ""]
    for f in exp.factors:
        vals = _values(rows, f.name)
        if not vals:
            continue
        for m in exp.table_metrics:
            label, scale = LABELS[m]
            lines += [f"**{label}** by {f.title}:", "",
                      "| policy | " + " | ".join(str(v) for v in vals) + " |", "|---|" + "---|" * len(vals)]
            for p in _policies(rows):
                lines.append(f"| {p}{_mark(info.get(p, ''))} | "
                             + " | ".join(_pm([r[m] for r in g[(f.name, p, v)]], scale) for v in vals) + " |")
            if m == "avg_jct_s" and any(r["lower_bound_avg_jct_s"] is not None for r in rows):
                lines.append("| lower bound | " + " | ".join(
                    _pm([r["lower_bound_avg_jct_s"] for r in g[(f.name, _policies(rows)[0], v)]], scale)
                    for v in vals) + " |")
            lines.append("")
        if len(_policies(rows)) > 1 and "avg_jct_s" in exp.table_metrics:
            lines += [f"Ranking by mean avg JCT (fastest first) at each {f.title}:", "", "| value | ranking |", "|---|---|"]
            for v in vals:
                means = {p: interval([r["avg_jct_s"] for r in g[(f.name, p, v)] if r["avg_jct_s"] is not None])[0]
                         for p in _policies(rows)}
                order = sorted((p for p in means if means[p] == means[p]), key=means.__getitem__)
                lines.append(f"| {v} | {', '.join(order)} |")
            lines.append("")
    if pngs:
        lines.append("Plots: " + ", ".join(pngs))
    return "\n".join(lines) + "\n"
