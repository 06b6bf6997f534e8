"""Reproduce a published table: Pollux's (Qiao et al., OSDI'21, Sec. 5.2,
Table 2 "1.0x job load") average JCT of Pollux, Optimus+Oracle+TunedJobs and
Tiresias+TunedJobs over the 8 workloads of the Pollux artifact, against the
authors' own simulator results (``pollux/reference-results/*/summary.json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.data import data_dir

# Our policy name -> (label in the paper, folder of the authors' results).
POLLUX_TABLE: dict[str, tuple[str, str]] = {
    "tiresias-pollux": ("Tiresias+TunedJobs", "tiresias-1.0"),
    "optimus-oracle": ("Optimus+Oracle+TunedJobs", "optimus-1.0"),
    "pollux": ("Pollux", "pollux-1.0"),
}
WORKLOADS = tuple(range(1, 9))


def published(policy: str, root: Path | None = None) -> dict[int, float]:
    """The authors' average JCT (s) per workload."""
    folder = POLLUX_TABLE[policy][1]
    path = (root or data_dir()) / "pollux" / "reference-results" / folder / "summary.json"
    try:
        avgs = json.loads(path.read_text())["avgs"]
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: the Pollux reference results are missing (see ../shared/data/SOURCES.md)") from None
    except (KeyError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: expected a JSON object with 'avgs' {{workload-N: seconds}}: {e}") from None
    return {int(k.split("-")[-1]): float(v) for k, v in avgs.items()}


def run_one(policy: str, workload: int, seed: int = 0) -> tuple[str, int, float, int]:
    """Average JCT (s) of one policy on one Pollux workload, and unfinished jobs."""
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    res = simulate(resolve_run_config(f"pollux-w{workload}", policy, seed))
    jct = res.finish_s - np.array([j.arrival_s for j in res.jobs])
    return policy, workload, float(np.nanmean(jct)), int(np.isnan(jct).sum())


def reproduce_pollux(
    workers: int = 2,
    workloads: tuple[int, ...] = WORKLOADS,
    policies: tuple[str, ...] = tuple(POLLUX_TABLE),
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run every (policy, workload) in a process pool; per policy the mean
    over workloads of the average JCT, ours and published, in hours."""
    ref = {p: published(p) for p in policies}
    tasks = [(p, w) for w in workloads for p in policies]
    got: dict[tuple[str, int], tuple[float, int]] = {}
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = [pool.submit(run_one, p, w) for p, w in tasks]
        for f in as_completed(futs):
            p, w, jct, unfinished = f.result()
            got[p, w] = (jct, unfinished)
            if progress is not None:
                progress(len(got), len(tasks))
    rows = []
    for p in policies:
        ours = [got[p, w][0] for w in workloads]
        pub = [ref[p][w] for w in workloads]
        o_h, p_h = float(np.mean(ours)) / 3600, float(np.mean(pub)) / 3600
        rows.append({
            "policy": p,
            "label": POLLUX_TABLE[p][0],
            "ours_h": round(o_h, 3),
            "published_h": round(p_h, 3),
            "diff_pct": round(100 * (o_h / p_h - 1), 1),
            "unfinished": int(sum(got[p, w][1] for w in workloads)),
            "per_workload_s": {f"workload-{w}": {"ours": round(got[p, w][0], 1), "published": round(ref[p][w], 1)}
                               for w in workloads},
        })
    return {"workloads": list(workloads), "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{'policy':<26} {'ours (h)':>9} {'published (h)':>14} {'diff':>7}"]
    for r in result["rows"]:
        lines.append(f"{r['label']:<26} {r['ours_h']:>9.2f} {r['published_h']:>14.2f} {r['diff_pct']:>+6.1f}%")
    return "\n".join(lines)
