"""Microsoft ITP traces (microsoft/elasticflow-traces): ``job_id,
submission_time,duration,num_gpu`` in seconds; the publishers dropped jobs
shorter than 600 s."""

from __future__ import annotations

from pathlib import Path

from hrlsched.workload.loaders.base import TraceRecord, parse_float, parse_int, read_csv_rows

FIELDS = {"job_id": str, "submission_time": parse_float, "duration": parse_float, "num_gpu": parse_int}
WHAT = {"job_id": "a job id", "submission_time": "seconds", "duration": "seconds", "num_gpu": "a whole number of GPUs"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        if r["num_gpu"] < 1:  # type: ignore[operator]
            raise ValueError(f"{path}:{no}: field num_gpu: expected >= 1, got {r['num_gpu']}")
        if r["duration"] <= 0 or r["submission_time"] < 0:  # type: ignore[operator]
            raise ValueError(f"{path}:{no}: field duration/submission_time: expected duration > 0 and time >= 0")
        out.append(TraceRecord(name=str(r["job_id"]), arrival_s=float(r["submission_time"]), gpus=int(r["num_gpu"]),
                               duration_s=float(r["duration"])))
    out.sort(key=lambda t: t.arrival_s)
    return out
