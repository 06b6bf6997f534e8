"""Tiresias simulator traces (SymbioticLab/Tiresias, ``simulator/*.csv``;
Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
Learning", NSDI'19): ``job_id,num_gpu,submit_time,iterations,model_name,
duration,interval``; times in seconds. ``interval`` (the gap to the next
submission) and ``iterations`` are read and checked but the record keeps
the duration, which is what the Tiresias simulator replays."""

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

FIELDS = {"job_id": parse_str, "num_gpu": parse_int, "submit_time": parse_float, "iterations": parse_int,
          "model_name": parse_str, "duration": parse_float, "interval": parse_float}
WHAT = {"job_id": "a job id", "num_gpu": "a whole number of GPUs", "submit_time": "seconds (a number)",
        "iterations": "a whole number of iterations", "model_name": "a model name", "duration": "seconds (a number)",
        "interval": "seconds (a number)"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        check_min(path, no, r, "num_gpu", 1)
        check_min(path, no, r, "submit_time", 0)
        check_min(path, no, r, "iterations", 0)
        check_min(path, no, r, "duration", 0, strict=True)
        check_min(path, no, r, "interval", 0)
        out.append(TraceRecord(name=f"tiresias-{r['job_id']}", arrival_s=float(r["submit_time"]),  # type: ignore[arg-type]
                               gpus=int(r["num_gpu"]), duration_s=float(r["duration"]),  # type: ignore[arg-type]
                               model=str(r["model_name"])))
    out.sort(key=lambda t: t.arrival_s)
    return out
