"""The report of a comparison directory (``hrlsched compare --out``): its
table (comparison.csv: mean ± 95% interval over seeds per policy, and the
lower bound), its plots, every run's own figures and the config the runs
share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrlsched.experiments.compare import BOUND
from hrlsched.report import page
from hrlsched.report.files import (
    as_float,
    plot_files,
    read_csv,
    read_json,
    read_png,
    read_text,
    run_dirs,
)
from hrlsched.report.page import Head, Page
from hrlsched.report.run import config_of

MARKERS = ("comparison.csv",)

# comparison.csv's columns as a person reads them: label, divisor (seconds shown in hours).
COLUMNS = {
    "avg_jct_s": ("avg JCT (h)", 3600.0), "p50_jct_s": ("p50 JCT (h)", 3600.0), "p95_jct_s": ("p95 JCT (h)", 3600.0),
    "p99_jct_s": ("p99 JCT (h)", 3600.0), "makespan_s": ("makespan (h)", 3600.0),
    "gpu_util_mean": ("GPU util (%)", 0.01), "avg_queue_s": ("avg queue (h)", 3600.0), "max_ftf": ("max FTF", 1.0),
    "restarts_total": ("restarts", 1.0), "jobs_completed": ("jobs done", 1.0),
}


def main_table(rows: list[dict[str, str]], caption: str) -> str:
    """comparison.csv, each metric with its 95% half-width beside it."""
    metrics = [c for c in (rows[0] if rows else {}) if c not in ("policy", "seeds") and not c.endswith("_ci95")]
    heads = [Head("policy"), Head("seeds", "seeds", numeric=True)]
    heads += [Head(COLUMNS.get(m, (m, 1.0))[0], m, COLUMNS.get(m, (m, 1.0))[1], numeric=True) for m in metrics]
    cells = [[r.get("policy", ""), page.num(as_float(r.get("seeds")))]
             + [page.num(as_float(r.get(m)), COLUMNS.get(m, (m, 1.0))[1], as_float(r.get(f"{m}_ci95")))
                for m in metrics]
             for r in rows]
    return page.table(heads, cells, caption, table_id="main-table")


def runs_table(runs: list[tuple[str, int, Path]]) -> str:
    """Each run's own figures (summary.json), one row per policy and seed."""
    keys = ["avg_jct_s", "p95_jct_s", "makespan_s", "gpu_util_mean", "restarts_total", "jobs_completed", "jobs_total"]
    heads = [Head("run"), Head("seed", numeric=True)]
    heads += [Head(COLUMNS.get(k, (k.replace("_", " "), 1.0))[0], k, COLUMNS.get(k, (k, 1.0))[1], numeric=True)
              for k in keys]
    rows: list[list[page.Cell]] = []
    for label, seed, d in runs:
        s = read_json(d / "summary.json")
        rows.append([label, page.num(seed)]
                    + [page.num(s.get(k) if isinstance(s.get(k), (int, float)) else None, COLUMNS.get(k, (k, 1.0))[1])
                       for k in keys])
    return page.table(heads, rows)


def shared_config(runs: list[tuple[str, int, Path]]) -> tuple[dict[str, Any] | None, str]:
    """The first run's config, and a line saying whether every run has its
    scenario (they differ in policy and seed, by design)."""
    if not runs:
        return None, ""
    first = config_of(runs[0][2])
    differ = sorted({f"{label}/seed{seed}" for label, seed, d in runs[1:]
                     if config_of(d).get("scenario") != first.get("scenario")})
    where = f"runs/{runs[0][0]}/seed{runs[0][1]}/config.yaml"
    if differ:
        return first, f"{where}; the scenario differs in {', '.join(differ)} (see their config.yaml)"
    return first, f"{where}: every run has this scenario; they differ in policy and seed"


def build(folder: Path) -> Page:
    from hrlsched.seeds import seeds_text

    rows = read_csv(folder / "comparison.csv")
    runs = run_dirs(folder)
    seeds = sorted({s for _, s, _ in runs})
    cfg, where = shared_config(runs)
    scenario = str(cfg.get("scenario", {}).get("name", "?")) if cfg else "?"
    policies = [r.get("policy", "") for r in rows if r.get("policy") != BOUND]
    p = Page(f"Comparison: {scenario}",
             "Policies on one scenario (hrlsched compare), paired by seed: mean ± 95% interval over the seeds "
             "(no interval with one seed); the lower bound is the floor under every policy's average JCT.",
             [("scenario", scenario), ("policies", ", ".join(policies)),
              ("seeds", seeds_text(seeds) if seeds else "(no runs kept in runs/)")])
    p.add("Table", main_table(rows, f"comparison.csv: {len(rows)} rows, times in hours"))
    p.add("Plots", page.plots([page.figure(read_png(f), f"{f.relative_to(folder)}") for f in plot_files(folder)]))
    if runs:
        p.add("Runs", page.details(f"each run's own figures ({len(runs)} runs, under runs/)", runs_table(runs)))
    if cfg is not None:
        p.add("Config", page.para(where) + page.code(read_text(runs[0][2] / "config.yaml")))
    return p

