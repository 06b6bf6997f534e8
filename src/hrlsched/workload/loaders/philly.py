"""Microsoft Philly jobs as distilled by the Pollux authors
(petuum/adaptdl osdi21-artifact, ``simulator/traces/philly.csv``):
``timestamp,duration,num_gpus,gpu_time,cluster``; timestamp
``YYYY-MM-DD HH:MM:SS`` (taken as UTC), duration and gpu_time in seconds,
cluster the virtual cluster (kept as the record's user/queue). Arrivals are
seconds from the earliest timestamp of the file."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from hrlsched.workload.loaders.base import (
    TraceRecord,
    check_min,
    parse_float,
    parse_int,
    parse_str,
    read_csv_rows,
)


def parse_time(raw: str) -> float:
    if len(raw) != 19 or raw[10] != " ":  # fromisoformat (fast, in C) would accept other layouts too
        raise ValueError
    return datetime.fromisoformat(raw).replace(tzinfo=timezone.utc).timestamp()


FIELDS = {"timestamp": parse_time, "duration": parse_float, "num_gpus": parse_int, "gpu_time": parse_float,
          "cluster": parse_str}
WHAT = {"timestamp": "a date-time YYYY-MM-DD HH:MM:SS", "duration": "seconds (a number)",
        "num_gpus": "a whole number of GPUs", "gpu_time": "GPU-seconds (a number)", "cluster": "a virtual-cluster name"}


def load(path: str | Path) -> list[TraceRecord]:
    rows = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        check_min(path, no, r, "duration", 0, strict=True)
        check_min(path, no, r, "num_gpus", 1)
        rows.append((no, r))
    t0 = min((float(r["timestamp"]) for _, r in rows), default=0.0)  # type: ignore[arg-type]
    out = [TraceRecord(name=f"philly-{no}", arrival_s=float(r["timestamp"]) - t0, gpus=int(r["num_gpus"]),  # type: ignore[arg-type]
                       duration_s=float(r["duration"]), user=str(r["cluster"])) for no, r in rows]  # type: ignore[arg-type]
    out.sort(key=lambda t: t.arrival_s)
    return out


def epoch_of_first(path: str | Path) -> float:
    """Unix time of the earliest timestamp (the origin of ``arrival_s``)."""
    return min((float(r["timestamp"]) for _, r in read_csv_rows(path, FIELDS, WHAT)), default=0.0)  # type: ignore[arg-type]
