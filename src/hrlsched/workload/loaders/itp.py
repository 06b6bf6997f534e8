"""Microsoft ITP traces (microsoft/elasticflow-traces, ``data/raw-traces``):
``job_id,submission_time,duration,num_gpu``, times in seconds from the
trace's start. The publishers dropped jobs shorter than 600 s (ElasticFlow,
Gu et al., ASPLOS'23)."""

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

FIELDS = {"job_id": parse_str, "submission_time": parse_float, "duration": parse_float, "num_gpu": parse_int}
WHAT = {"job_id": "a non-empty job id", "submission_time": "seconds (a number)", "duration": "seconds (a number)",
        "num_gpu": "a whole number of GPUs"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        check_min(path, no, r, "submission_time", 0)
        check_min(path, no, r, "duration", 0, strict=True)
        check_min(path, no, r, "num_gpu", 1)
        out.append(TraceRecord(name=str(r["job_id"]), arrival_s=float(r["submission_time"]),  # type: ignore[arg-type]
                               gpus=int(r["num_gpu"]), duration_s=float(r["duration"])))  # type: ignore[arg-type]
    out.sort(key=lambda t: t.arrival_s)
    return out
