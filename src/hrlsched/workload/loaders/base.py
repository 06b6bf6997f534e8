"""What every trace format is read into, and the shared CSV reader."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TraceRecord:
    """One job of a trace, before it becomes a simulated ``Job``."""

    name: str
    arrival_s: float
    gpus: int
    duration_s: float | None = None  # trace duration, when the trace has one
    model: str | None = None  # model/application, when the trace names one
    batch_size: int | None = None
    user: str = "default"


def parse_int(raw: str) -> int:
    v = float(raw)
    if not v.is_integer():
        raise ValueError
    return int(v)


def parse_float(raw: str) -> float:
    v = float(raw)
    if not math.isfinite(v):
        raise ValueError
    return v


def read_csv_rows(
    path: str | Path, fields: dict[str, Callable[[str], object]], what: dict[str, str]
) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, parsed row) of a CSV whose header holds at least ``fields``.

    ``what`` says, per field, what was expected (for the error message)."""
    path = Path(path)
    try:
        fh = open(path, newline="")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    with fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        missing = [f for f in fields if f not in header]
        if missing:
            raise ValueError(f"{path}:1: missing column(s) {', '.join(missing)}; expected {','.join(fields)}")
        pos = {f: header.index(f) for f in fields}
        for no, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) < len(header):
                raise ValueError(f"{path}:{no}: expected {len(header)} fields, got {len(row)}")
            out: dict[str, object] = {}
            for f, parse in fields.items():
                raw = row[pos[f]].strip()
                try:
                    out[f] = parse(raw)
                except (ValueError, TypeError):
                    raise ValueError(f"{path}:{no}: field {f}: expected {what[f]}, got {raw!r}") from None
            yield no, out
