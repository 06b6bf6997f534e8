"""hrlsched's own trace format (docs/traces.md): a CSV with a header, one job
a line. Required columns: ``arrival_s`` (seconds >= 0) and ``gpus`` (whole
number >= 0). Optional columns, in any order, and cells that may be empty:
``name``, ``duration_s`` (seconds > 0), ``model``, ``batch_size``, ``user``,
``status``, ``gpu_type``, ``gpu_fraction`` (0 < f <= 1), ``arch`` (ps,
allreduce, or any: left to the scheduler), ``mode`` (sync, async or any).
``dump`` writes all of them, so that ``load(dump(records)) == records``."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from hrlsched.io import write_text
from hrlsched.workload.loaders.base import (
    TraceRecord,
    check_min,
    optional,
    parse_float,
    parse_int,
    read_csv_rows,
    row_error,
)


def choice(*allowed: str):  # noqa: ANN201 - a cell parser
    def f(raw: str) -> str:
        if raw not in allowed:
            raise ValueError
        return raw

    return f


COLUMNS = ["name", "arrival_s", "gpus", "duration_s", "model", "batch_size", "user", "status", "gpu_type",
           "gpu_fraction", "arch", "mode"]
FIELDS = {"arrival_s": parse_float, "gpus": parse_int}
OPTIONAL = {"name": str, "duration_s": optional(parse_float), "model": optional(str),
            "batch_size": optional(parse_int), "user": str, "status": optional(str), "gpu_type": optional(str),
            "gpu_fraction": optional(parse_float), "arch": optional(choice("ps", "allreduce", "any")),
            "mode": optional(choice("sync", "async", "any"))}
WHAT = {"name": "a job name", "arrival_s": "seconds (a number)", "gpus": "a whole number of GPUs",
        "duration_s": "seconds (a number) or empty", "model": "a model name or empty",
        "batch_size": "a whole number or empty", "user": "a user name", "status": "a status or empty",
        "gpu_type": "a GPU type or empty", "gpu_fraction": "a number in (0, 1] or empty",
        "arch": "ps, allreduce, any or empty", "mode": "sync, async, any or empty"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT, OPTIONAL):
        check_min(path, no, r, "arrival_s", 0)
        check_min(path, no, r, "gpus", 0)
        if r.get("duration_s") is not None:
            check_min(path, no, r, "duration_s", 0, strict=True)
        if r.get("batch_size") is not None:
            check_min(path, no, r, "batch_size", 1)
        frac = r.get("gpu_fraction")
        if frac is not None and not 0 < frac <= 1:  # type: ignore[operator]
            raise row_error(path, no, "gpu_fraction", "a number in (0, 1]", frac)
        if r.get("arch") == "allreduce" and r.get("mode") == "async":  # a ring is a collective
            raise row_error(path, no, "mode", "sync or any for an allreduce job (asynchronous needs arch ps)",
                            "async")
        out.append(TraceRecord(
            name=str(r.get("name") or f"job-{no}"), arrival_s=float(r["arrival_s"]), gpus=int(r["gpus"]),  # type: ignore[arg-type]
            duration_s=r.get("duration_s"), model=r.get("model"), batch_size=r.get("batch_size"),  # type: ignore[arg-type]
            user=str(r.get("user") or "default"), status=r.get("status"), gpu_type=r.get("gpu_type"),  # type: ignore[arg-type]
            gpu_fraction=1.0 if frac is None else float(frac),  # type: ignore[arg-type]
            arch=r.get("arch"), mode=r.get("mode"),  # type: ignore[arg-type]
        ))
    out.sort(key=lambda t: t.arrival_s)
    return out


def _cell(v: object) -> str:
    if v is None:
        return ""
    return repr(v) if isinstance(v, float) else str(v)


def dumps(records: Sequence[TraceRecord]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in records:
        w.writerow([_cell(getattr(r, c)) for c in COLUMNS])
    return buf.getvalue()


def dump(records: Sequence[TraceRecord], path: str | Path) -> None:
    """Write ``records`` whole (temporary file, then rename)."""
    write_text(path, dumps(records))
