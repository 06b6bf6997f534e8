"""Trace loaders, one module per format. Each returns ``TraceRecord``s and
rejects a malformed row with an error naming the file, line, field and what
was expected. ``load_trace(path, format)`` picks the loader by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hrlsched.data import data_dir
from hrlsched.workload.loaders import alibaba, gavel, generic, itp, philly, pollux, tiresias
from hrlsched.workload.loaders.base import TraceFormatError, TraceRecord, read_csv_rows

LOADERS: dict[str, Callable[..., list[TraceRecord]]] = {
    "itp": itp.load,
    "pollux": pollux.load,
    "philly": philly.load,
    "alibaba": alibaba.load,
    "tiresias": tiresias.load,
    "gavel": gavel.load,
    "generic": generic.load,
}
FORMATS: tuple[str, ...] = tuple(LOADERS)


def load_trace(path: str | Path, fmt: str, **options: Any) -> list[TraceRecord]:
    """Records of ``path`` read as ``fmt``, sorted by arrival. Options:
    gavel: ``throughputs`` (Gavel's simulation_throughputs.json; default the
    data folder's ``gavel/simulation_throughputs.json`` when it exists) and
    ``worker_type``."""
    try:
        loader = LOADERS[fmt]
    except KeyError:
        raise ValueError(f"format: unknown trace format {fmt!r}; expected one of {', '.join(FORMATS)}") from None
    if fmt == "gavel" and options.get("throughputs") is None:
        default = data_dir() / "gavel" / "simulation_throughputs.json"
        options["throughputs"] = default if default.exists() else None
    elif fmt != "gavel" and options:
        raise ValueError(f"format {fmt!r} takes no options, got {sorted(options)}")
    return loader(path, **options)


__all__ = ["FORMATS", "LOADERS", "TraceFormatError", "TraceRecord", "load_trace", "read_csv_rows"]
