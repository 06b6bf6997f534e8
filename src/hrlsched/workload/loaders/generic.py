"""hrlsched's own trace format (docs/traces.md): a CSV with the columns
``name,arrival_s,gpus,duration_s,model,batch_size,user``; ``duration_s``,
``model``, ``batch_size`` and ``user`` may be empty."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from hrlsched.io import write_text
from hrlsched.workload.loaders.base import TraceRecord, parse_float, parse_int, read_csv_rows

COLUMNS = ["name", "arrival_s", "gpus", "duration_s", "model", "batch_size", "user"]


def _opt(parse):
    return lambda raw: None if raw == "" else parse(raw)


FIELDS = {"name": str, "arrival_s": parse_float, "gpus": parse_int, "duration_s": _opt(parse_float),
          "model": _opt(str), "batch_size": _opt(parse_int), "user": str}
WHAT = {"name": "a job name", "arrival_s": "seconds >= 0", "gpus": "a whole number >= 1",
        "duration_s": "seconds > 0 or empty", "model": "a model name or empty", "batch_size": "a whole number or empty",
        "user": "a user name"}


def load(path: str | Path) -> list[TraceRecord]:
    out = []
    for no, r in read_csv_rows(path, FIELDS, WHAT):
        if r["gpus"] < 1 or r["arrival_s"] < 0 or (r["duration_s"] is not None and r["duration_s"] <= 0):  # type: ignore[operator]
            raise ValueError(f"{path}:{no}: expected gpus >= 1, arrival_s >= 0 and duration_s > 0")
        out.append(TraceRecord(name=str(r["name"]), arrival_s=float(r["arrival_s"]), gpus=int(r["gpus"]),
                               duration_s=r["duration_s"], model=r["model"], batch_size=r["batch_size"],  # type: ignore[arg-type]
                               user=str(r["user"]) or "default"))
    out.sort(key=lambda t: t.arrival_s)
    return out


def dump(records: Sequence[TraceRecord], path: str | Path) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in records:
        w.writerow([r.name, repr(r.arrival_s), r.gpus, "" if r.duration_s is None else repr(r.duration_s),
                    r.model or "", "" if r.batch_size is None else r.batch_size, r.user])
    write_text(path, buf.getvalue())
