"""Writes a run directory: config.yaml, jobs.csv, rounds.csv, summary.json and
plots, each file whole (temporary name, then rename)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.io import write_json, write_text, write_yaml
from hrlsched.sim.engine import SimResult
from hrlsched.sim.metrics import JOB_COLUMNS, ROUND_COLUMNS, job_table, summary


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return "" if math.isnan(v) else repr(round(float(v), 6))
    return str(v)


def _column(c: np.ndarray) -> list[str]:
    """``_fmt`` of each value, a whole column at a time (Python scalars: the same text)."""
    vals = np.asarray(c).tolist()
    if np.asarray(c).dtype.kind == "f":
        return ["" if v != v else repr(round(v, 6)) for v in vals]
    return [_fmt(v) for v in vals]


def _csv(columns: list[str], table: Mapping[str, np.ndarray]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(zip(*(_column(table[c]) for c in columns)))
    return buf.getvalue()


def write_run(
    out: str | Path, res: SimResult, config: Mapping[str, Any], policy: str, scenario: str, plots_on: bool = True
) -> dict[str, Any]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_yaml(out / "config.yaml", dict(config))
    jt = job_table(res)
    write_text(out / "jobs.csv", _csv(JOB_COLUMNS, jt))
    write_text(out / "rounds.csv", _csv(ROUND_COLUMNS, res.rounds))
    summ = summary(res, policy, scenario)
    write_json(out / "summary.json", summ)
    if plots_on:
        from hrlsched.sim import plots  # loaded only by the runs that draw

        plots.plot_jct_cdf({policy: jt["jct_s"]}, out / "jct_cdf.png",
                           title=f"{scenario} / {policy}: job completion times (CDF)")
        plots.plot_timeline({policy: res.rounds}, res.n_gpus, out / "timeline.png",
                            title=f"{scenario} / {policy}: GPU utilisation and queue over time")
    return summ
