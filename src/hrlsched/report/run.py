"""The report of a run directory (``hrlsched simulate --out``): its summary,
its plots (drawn here where the run was made with ``--no-plots``), its
first jobs and its config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.report import page
from hrlsched.report.files import ReportError, as_float, read_csv, read_json, read_png, read_text
from hrlsched.report.page import Head, Num, Page

MARKERS = ("summary.json", "config.yaml")
JOBS_SHOWN = 100


def summary_table(summ: dict[str, Any]) -> str:
    """summary.json's figures as metric / value, durations in hours and
    minutes (its names, policy and scenario, are among the facts above)."""
    from hrlsched.units import format_metric

    rows: list[list[page.Cell]] = []
    for k, v in summ.items():
        if v is None:
            rows.append([k, Num(None, "-")])
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            rows.append([k, Num(float(v), format_metric(k, v))])
        elif k not in ("policy", "scenario"):
            rows.append([k, str(v)])
    return page.table([Head("metric"), Head("value", numeric=True)], rows, "summary.json", table_id="main-table",
                      compact=True)


def config_of(folder: Path) -> dict[str, Any]:
    import yaml

    try:
        cfg = yaml.safe_load(read_text(folder / "config.yaml"))
    except yaml.YAMLError as e:
        raise ReportError(f"{folder / 'config.yaml'}: cannot be read as YAML ({e})") from None
    if not isinstance(cfg, dict):
        raise ReportError(f"{folder / 'config.yaml'}: expected a run's config (a mapping), got {type(cfg).__name__}")
    return cfg


def n_gpus(cfg: dict[str, Any], source: str = "config.yaml") -> int:
    from hrlsched.cluster import Topology
    from hrlsched.config import ConfigError, parse_run_config

    try:
        return Topology.from_spec(parse_run_config(cfg, source).scenario.cluster).n_gpus
    except ConfigError as e:  # a hand-edited config.yaml: each wrong field named
        raise ReportError(str(e)) from None


def build(folder: Path) -> Page:
    summ = read_json(folder / "summary.json")
    if not isinstance(summ, dict):
        raise ReportError(f"{folder / 'summary.json'}: expected a run's summary (a JSON object)")
    cfg = config_of(folder)
    scenario = str(summ.get("scenario", cfg.get("scenario", {}).get("name", "?")))
    policy = str(summ.get("policy", cfg.get("policy", "?")))
    seed = cfg.get("seed")
    p = Page(f"Run: {scenario} / {policy} / seed {seed}",
             "One simulation (hrlsched simulate): the summary of the run, its plots, its first jobs and its config. "
             "Times in summary.json and jobs.csv are in seconds.",
             [("scenario", scenario), ("policy", policy), ("seed", str(seed))])
    p.add("Summary", summary_table(summ))
    p.add("Plots", page.plots(plot_figures(folder, cfg, f"{scenario} / {policy}")))
    jobs = read_csv(folder / "jobs.csv") if (folder / "jobs.csv").is_file() else []
    if jobs:
        p.add("Jobs", jobs_table(jobs))
    p.add("Config", page.para("config.yaml: rerun with hrlsched simulate --scenario config.yaml --out DIR")
          + page.code(read_text(folder / "config.yaml")))
    return p


def plot_figures(folder: Path, cfg: dict[str, Any], name: str) -> list[str]:
    """The run's own plots; where it has none, drawn from jobs.csv and rounds.csv."""
    own = [f for f in ("jct_cdf.png", "timeline.png") if (folder / f).is_file()]
    if own:
        return [page.figure(read_png(folder / f), f) for f in own]
    if not ((folder / "jobs.csv").is_file() and (folder / "rounds.csv").is_file()):
        return []
    from hrlsched.report.figures import run_plots

    jct = column(read_csv(folder / "jobs.csv"), "jct_s")  # nan: a job not finished
    rr = read_csv(folder / "rounds.csv")
    rounds = {k: column(rr, k) for k in ("time_s", "gpus_busy", "jobs_queued")}
    return [page.figure(png, f"{caption} (drawn for this report)")
            for png, caption in run_plots(jct, rounds, n_gpus(cfg, str(folder / "config.yaml")), name)]


def column(rows: list[dict[str, str]], key: str) -> np.ndarray:
    """One column of a CSV as floats (nan where empty)."""
    vals = [as_float(r.get(key)) for r in rows]
    return np.array([np.nan if v is None else v for v in vals], dtype=float)


def jobs_table(jobs: list[dict[str, str]]) -> str:
    note = f"the first {min(len(jobs), JOBS_SHOWN)} of {len(jobs)} jobs (all in jobs.csv); times in seconds"
    return page.details(note, page.csv_table(jobs, JOBS_SHOWN))
