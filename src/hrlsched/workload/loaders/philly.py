"""Microsoft Philly jobs as distilled by the Pollux authors
(``simulator/traces/philly.csv``): ``timestamp,duration,num_gpus,gpu_time,
cluster``; timestamp ``YYYY-MM-DD HH:MM:SS`` (UTC), duration in seconds."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from hrlsched.workload.loaders.base import TraceRecord, parse_float, parse_int, read_csv_rows


def parse_time(raw: str) -> float:
    return datetime.fromisoformat(raw).replace(tzinfo=timezone.utc).timestamp()


FIELDS = {"timestamp": parse_time, "duration": parse_float, "num_gpus": parse_int, "gpu_time": parse_float, "cluster": str}
WHAT = {"timestamp": "a date-time YYYY-MM-DD HH:MM:SS", "duration": "seconds", "num_gpus": "a whole number of GPUs", "gpu_time": "GPU-seconds",
        "cluster": "a cluster name"}


def load(path: str | Path) -> list[TraceRecord]:
    rows = list(read_csv_rows(path, FIELDS, WHAT))
    for no, r in rows:
        if r["num_gpus"] < 1 or r["duration"] <= 0:  # type: ignore[operator]
            raise ValueError(f"{path}:{no}: fields num_gpus/duration: expected num_gpus >= 1 and duration > 0")
    t0 = min((float(r["timestamp"]) for _, r in rows), default=0.0)
    out = [TraceRecord(name=f"philly-{no}", arrival_s=float(r["timestamp"]) - t0, gpus=int(r["num_gpus"]),
                       duration_s=float(r["duration"]), user=str(r["cluster"])) for no, r in rows]
    out.sort(key=lambda t: t.arrival_s)
    return out
