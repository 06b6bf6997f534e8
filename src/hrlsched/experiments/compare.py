"""Policies x seeds on one scenario, in parallel; a table with means and 95%
intervals over seeds, and plots of all policies together."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from hrlsched.cluster import Topology
from hrlsched.config import RunConfig, load_yaml, resolve_run_config
from hrlsched.io import write_text
from hrlsched.sim import plots

METRICS = ["avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "gpu_util_mean", "avg_queue_s",
           "max_ftf", "restarts_total", "jobs_completed"]


def _run_one(cfg_json: str, out: str) -> tuple[str, int, dict[str, Any]]:
    from hrlsched.run import run_to_dir

    cfg = RunConfig.model_validate_json(cfg_json)
    summ = run_to_dir(cfg, out, plots=False)
    return cfg.policy, cfg.seed, summ


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (nan with one value)."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    if v.size == 1:
        return float(v[0]), float("nan")
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean()), float(half)


def compare(
    scenario: str,
    policies: list[str],
    seeds: int,
    out: str | Path,
    workers: int = 1,
    overrides: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    out = Path(out)
    cfgs = [resolve_run_config(scenario, p, s, overrides or []) for p in policies for s in range(seeds)]
    results: dict[tuple[str, int], dict[str, Any]] = {}
    jobs = [(c.model_dump_json(), str(out / "runs" / c.policy.replace("+", "_") / f"seed{c.seed}")) for c in cfgs]
    done = 0
    if workers <= 1:
        for cj, o in jobs:
            p, s, summ = _run_one(cj, o)
            results[(p, s)] = summ
            done += 1
            if progress:
                progress(done, len(jobs))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = [pool.submit(_run_one, cj, o) for cj, o in jobs]
            for f in as_completed(futs):
                p, s, summ = f.result()
                results[(p, s)] = summ
                done += 1
                if progress:
                    progress(done, len(jobs))
    rows = []
    for p in policies:
        row: dict[str, Any] = {"policy": p, "seeds": seeds}
        for m in METRICS:
            mean, half = interval([results[(p, s)].get(m) for s in range(seeds)])
            row[m] = mean
            row[f"{m}_ci95"] = half
        rows.append(row)
    write_outputs(out, scenario, rows, policies, seeds)
    return rows


def write_outputs(out: Path, scenario: str, rows: list[dict[str, Any]], policies: list[str], seeds: int) -> None:
    cols = ["policy", "seeds"] + [c for m in METRICS for c in (m, f"{m}_ci95")]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([r[c] if isinstance(r[c], str) else (f"{r[c]:.6g}" if r[c] == r[c] else "") for c in cols])
    write_text(out / "comparison.csv", buf.getvalue())
    md = [f"Scenario `{scenario}`, {seeds} seed(s); mean ± 95% interval over seeds.", "",
          "| policy | avg JCT (h) | p95 JCT (h) | makespan (h) | GPU util | avg queue (h) | max FTF | restarts |",
          "|---|---|---|---|---|---|---|---|"]

    def pm(r: dict[str, Any], m: str, scale: float = 1.0, fmt: str = ".2f") -> str:
        v, h = r[m], r[f"{m}_ci95"]
        return f"{v / scale:{fmt}}" + ("" if h != h else f" ± {h / scale:{fmt}}")

    for r in rows:
        md.append(f"| {r['policy']} | {pm(r, 'avg_jct_s', 3600)} | {pm(r, 'p95_jct_s', 3600)} | {pm(r, 'makespan_s', 3600)} | "
                  f"{pm(r, 'gpu_util_mean')} | {pm(r, 'avg_queue_s', 3600)} | {pm(r, 'max_ftf')} | {pm(r, 'restarts_total', 1, '.0f')} |")
    write_text(out / "comparison.md", "\n".join(md) + "\n")
    jcts, series = {}, {}
    for p in policies:
        run = out / "runs" / p.replace("+", "_") / "seed0"
        with open(run / "jobs.csv") as fh:
            jcts[p] = np.array([float(x["jct_s"]) if x["jct_s"] else np.nan for x in csv.DictReader(fh)])
        with open(run / "rounds.csv") as fh:
            rr = list(csv.DictReader(fh))
        series[p] = {k: np.array([float(x[k]) for x in rr]) for k in ("time_s", "gpus_busy", "jobs_queued")}
    cfg = load_yaml(out / "runs" / policies[0].replace("+", "_") / "seed0" / "config.yaml")
    n_gpus = Topology.from_spec(RunConfig.model_validate(cfg).scenario.cluster).n_gpus
    plots.plot_jct_cdf(jcts, out / "jct_cdf.png", title=f"{scenario}: JCT CDF (seed 0)")
    plots.plot_timeline(series, n_gpus, out / "utilisation.png")
