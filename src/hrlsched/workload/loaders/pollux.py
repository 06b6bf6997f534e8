"""Pollux workloads: ``name,time,application,num_replicas,batch_size``
(petuum/adaptdl, branch osdi21-artifact, ``simulator/workloads*/``): 160
jobs from the busiest 8 hours of Microsoft Philly, each naming a Pollux
application, its tuned GPU count and batch size ("TunedJobs"). No durations:
a job's work is its application's measured work to completion."""

from __future__ import annotations

from pathlib import Path

from hrlsched.workload.loaders.base import (
    TraceRecord,
    check_min,
    parse_float,
    parse_int,
    parse_str,
    read_csv_rows,
)

FIELDS = {"name": parse_str, "time": parse_float, "application": parse_str, "num_replicas": parse_int,
          "batch_size": parse_int}
WHAT = {"name": "a non-empty job name", "time": "a submission time in seconds", "application": "an application name",
        "num_replicas": "a whole number of GPUs", "batch_size": "a whole batch size"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        check_min(path, no, r, "time", 0)
        check_min(path, no, r, "num_replicas", 1)
        check_min(path, no, r, "batch_size", 1)
        out.append(TraceRecord(name=str(r["name"]), arrival_s=float(r["time"]), gpus=int(r["num_replicas"]),  # type: ignore[arg-type]
                               model=str(r["application"]), batch_size=int(r["batch_size"])))  # type: ignore[arg-type]
    out.sort(key=lambda t: t.arrival_s)
    return out
