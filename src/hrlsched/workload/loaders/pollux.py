"""Pollux workloads: ``name,time,application,num_replicas,batch_size``
(petuum/adaptdl, branch osdi21-artifact, ``simulator/workloads*/``): 160
jobs from the busiest 8 hours of Microsoft Philly, each naming a Pollux
application, its tuned GPU count and batch size ("TunedJobs")."""

from __future__ import annotations

from pathlib import Path

from hrlsched.workload.loaders.base import TraceRecord, parse_float, parse_int, read_csv_rows

FIELDS = {"name": str, "time": parse_float, "application": str, "num_replicas": parse_int, "batch_size": parse_int}
WHAT = {"name": "a job name", "time": "a submission time in seconds", "application": "an application name",
        "num_replicas": "a whole number of GPUs", "batch_size": "a whole batch size"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        for f in ("num_replicas", "batch_size"):
            if r[f] < 1:  # type: ignore[operator]
                raise ValueError(f"{path}:{no}: field {f}: expected >= 1, got {r[f]}")
        if r["time"] < 0:  # type: ignore[operator]
            raise ValueError(f"{path}:{no}: field time: expected >= 0, got {r['time']}")
        out.append(TraceRecord(name=str(r["name"]), arrival_s=float(r["time"]), gpus=int(r["num_replicas"]),
                               model=str(r["application"]), batch_size=int(r["batch_size"])))
    return out
