"""Record (or recompute) the regression fixtures of ``tests/test_regression.py``.

For every built-in allocation policy at its default placement, and a few
explicit placements, on ``default`` and ``pollux-w6`` (seed 0), store per job:
start, finish, restarts, GPU-seconds and mean workers while holding resources,
rounded to 1e-3. One gzip CSV per scenario. Re-record only when a change of
behaviour is intended, and say so in the commit:

    .venv/bin/python tests/data/regression/record.py [--scenario default] [--policy gavel ...]

``--policy`` re-records only the policies named and keeps the others' rows
as they are (a new policy, or one whose change of behaviour is intended).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIOS = {"default": 0, "pollux-w6": 0}  # scenario -> seed
EXTRA = ["fifo+pack", "fifo+topology", "drf+topology", "tiresias+topology"]
FIELDS = ["policy", "job_id", "start_s", "finish_s", "restarts", "gpu_seconds", "mean_workers"]


def policies() -> list[str]:
    """Every built-in policy but the learned ones (``LEARNED``): their figures
    move with each shipped checkpoint, and tests/test_agent.py covers them;
    and but the oracle planners (``PLANNERS``: minutes per episode,
    tests/test_lookahead.py covers them)."""
    from hrlsched.policies.registry import ALLOCATIONS, LEARNED, PLANNERS, SCHEDULERS

    return [*ALLOCATIONS, *(s for s in SCHEDULERS if s not in {*LEARNED, *PLANNERS}), *EXTRA]


def path_of(scenario: str) -> Path:
    return HERE / f"{scenario}.csv.gz"


def compute(scenario: str, policy: str, seed: int | None = None) -> dict[str, np.ndarray]:
    """The per-job figures of one run, in job order of the result."""
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    res = simulate(resolve_run_config(scenario, policy, SCENARIOS[scenario] if seed is None else seed))
    hold = res.hold_s
    mean_w = np.divide(res.worker_seconds, hold, out=np.zeros_like(hold), where=hold > 0)
    return {
        "job_id": np.array([j.job_id for j in res.jobs], dtype=np.int64),
        "start_s": res.start_s,
        "finish_s": res.finish_s,
        "restarts": res.restarts.astype(np.int64),
        "gpu_seconds": res.gpu_seconds,
        "mean_workers": mean_w,
    }


def load(scenario: str) -> dict[str, dict[str, np.ndarray]]:
    """policy -> column -> values, as recorded."""
    with gzip.open(path_of(scenario), "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    out: dict[str, dict[str, list]] = {}
    for r in rows:
        cols = out.setdefault(r["policy"], {k: [] for k in FIELDS[1:]})
        for k in FIELDS[1:]:
            cols[k].append(r[k])
    return {
        p: {k: np.array(v, dtype=np.int64 if k in ("job_id", "restarts") else float) for k, v in c.items()}
        for p, c in out.items()
    }


def _fmt(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:.3f}"


def _recorded_rows(scenario: str) -> dict[str, list[list[str]]]:
    """policy -> its rows as stored (strings), in file order."""
    if not path_of(scenario).exists():
        return {}
    with gzip.open(path_of(scenario), "rt", newline="") as f:
        rows = list(csv.reader(f))[1:]
    out: dict[str, list[list[str]]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


def record(scenario: str, only: list[str] | None = None) -> Path:
    """Re-record every policy, or only those in ``only`` (the others' rows kept)."""
    known = policies()
    unknown = sorted(set(only or ()) - set(known))
    if unknown:
        raise SystemExit(f"record.py: unknown policies {unknown}; expected some of {known}")
    kept = _recorded_rows(scenario) if only else {}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    for pol in known:
        if only and pol not in only and pol in kept:
            w.writerows(kept[pol])
            continue
        c = compute(scenario, pol)
        for k in range(c["job_id"].size):
            w.writerow([pol, int(c["job_id"][k]), _fmt(c["start_s"][k]), _fmt(c["finish_s"][k]),
                        int(c["restarts"][k]), _fmt(c["gpu_seconds"][k]), _fmt(c["mean_workers"][k])])
        print(f"{scenario} {pol}: {c['job_id'].size} jobs", file=sys.stderr)
    out = path_of(scenario)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:  # mtime=0: the same figures give the same bytes
        f.write(gzip.compress(buf.getvalue().encode(), mtime=0))
    os.replace(tmp, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--policy", action="append", help="only these policies (repeatable); the others' rows are kept")
    a = ap.parse_args()
    for sc in a.scenario or sorted(SCENARIOS):
        print(record(sc, a.policy))


if __name__ == "__main__":
    main()
