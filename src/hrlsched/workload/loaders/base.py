"""What every trace format is read into, and the shared CSV reader.

A loader only reads: it returns ``TraceRecord``s, one per job of the trace,
exactly as the trace states them (seconds, GPU counts, names). Turning a
record into a simulated ``Job`` (model, work, batch size) is
``hrlsched.workload.trace``'s business.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


class TraceFormatError(ValueError):
    """A row of a trace file is malformed; the message names the file, the
    line, the field and what was expected."""


@dataclass(frozen=True)
class TraceRecord:
    """One job of a trace, before it becomes a simulated ``Job``.

    ``arrival_s`` is seconds from the trace's own origin; ``duration_s`` is
    the run time the trace reports (None when the trace has none, e.g. a pod
    that never started); ``gpus`` may be 0 for a CPU-only entry (Alibaba)."""

    name: str
    arrival_s: float
    gpus: int
    duration_s: float | None = None  # trace duration, when the trace has one
    model: str | None = None  # model/application, when the trace names one
    batch_size: int | None = None
    user: str = "default"  # user, virtual cluster or queue
    status: str | None = None  # final state when the trace has one (Failed, Running, ...)
    gpu_type: str | None = None  # GPU model asked for, when the trace has one
    gpu_fraction: float = 1.0  # share of each GPU (Alibaba gpu_milli / 1000)
    arch: str | None = None  # ps, allreduce or any (left to the scheduler), when the trace says
    mode: str | None = None  # sync, async or any, when the trace says

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.gpu_fraction * (self.duration_s or 0.0)


def row_error(path: str | Path, line: int, field: str, expected: str, got: object) -> TraceFormatError:
    return TraceFormatError(f"{path}:{line}: field {field}: expected {expected}, got {got!r}")


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


def parse_str(raw: str) -> str:
    if not raw:
        raise ValueError
    return raw


def optional(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An empty cell reads as None, anything else through ``parse``."""

    def f(raw: str) -> object:
        return None if raw == "" else parse(raw)

    return f


def open_text(path: str | Path) -> io.StringIO:
    """The file's text, for ``csv``; bytes that are not UTF-8 are reported
    with the file and line, not as a bare decode error."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(f"{path}: is a folder, expected a trace file") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise TraceFormatError(
            f"{path}:{line}: byte 0x{raw[e.start]:02x} at column {col} is not UTF-8; expected a UTF-8 text (CSV) file"
        ) from None
    return io.StringIO(text, newline="")


def read_csv_rows(
    path: str | Path,
    fields: Mapping[str, Callable[[str], object]],
    what: Mapping[str, str],
    optional_fields: Mapping[str, Callable[[str], object]] | None = None,
) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, parsed row) of a CSV whose header holds at least ``fields``.

    ``what`` says, per field, what was expected (for the error message).
    ``optional_fields`` are read when the header has them (missing: absent
    from the row dict). Blank lines are skipped."""
    opt = dict(optional_fields or {})
    with open_text(path) as fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        missing = [f for f in fields if f not in header]
        if missing:
            raise TraceFormatError(
                f"{path}:1: missing column(s) {', '.join(missing)}; expected a header with {','.join(fields)}"
            )
        pos = {f: header.index(f) for f in fields}
        pos.update({f: header.index(f) for f in opt if f in header})
        parsers = {**{f: fields[f] for f in fields}, **{f: opt[f] for f in opt if f in header}}
        for no, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise TraceFormatError(f"{path}:{no}: expected {len(header)} fields ({','.join(header)}), got {len(row)}")
            out: dict[str, object] = {}
            for f, parse in parsers.items():
                raw = row[pos[f]].strip()
                try:
                    out[f] = parse(raw)
                except (ValueError, TypeError):
                    raise row_error(path, no, f, what[f], raw) from None
            yield no, out


def check_min(path: str | Path, no: int, row: Mapping[str, object], field: str, lo: float, strict: bool = False) -> None:
    """Reject ``row[field]`` below ``lo`` (or at ``lo`` when strict)."""
    v = row[field]
    if v is None:
        return
    if (v <= lo) if strict else (v < lo):  # type: ignore[operator]
        raise row_error(path, no, field, f"{'>' if strict else '>='} {lo:g}", v)
