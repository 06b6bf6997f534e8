"""Where the public data folder is: ``$HRLSCHED_DATA``, else
``../shared/data`` from the working directory or from the repository root.
Scenario files name data files as ``${data}/...``."""

from __future__ import annotations

import os
from pathlib import Path

PLACEHOLDER = "${data}"
WHERE = (
    "set HRLSCHED_DATA to the data folder or place it at ../shared/data; docs/traces.md says where each "
    "file comes from (e.g. ITP: microsoft/elasticflow-traces; Pollux: petuum/adaptdl, branch osdi21-artifact)"
)


class DataMissingError(ValueError):
    """A scenario needs a file of the public data folder that is not there."""


def data_dir() -> Path:
    env = os.environ.get("HRLSCHED_DATA")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]  # src/hrlsched/workload/data.py -> repository root
    for cand in (Path.cwd().parent / "shared" / "data", repo.parent / "shared" / "data"):
        if cand.is_dir():
            return cand
    return Path.cwd().parent / "shared" / "data"


def resolve_path(path: str | Path) -> Path:
    """``${data}/x`` -> the data folder's ``x``; other paths unchanged."""
    return Path(str(path).replace(PLACEHOLDER, str(data_dir())))


def needs_data(path: str | Path) -> bool:
    return PLACEHOLDER in str(path)


def check_data(name: str, paths: list[str]) -> None:
    """Raise ``DataMissingError`` naming what is missing and where to get it.
    ``paths`` are relative to the data folder or carry ``${data}``."""
    root = data_dir()
    missing = []
    for p in paths:
        full = resolve_path(p) if needs_data(p) else root / p
        if not full.exists():
            missing.append(str(full))
    if missing:
        raise DataMissingError(f"scenario {name!r} needs the public data folder ({', '.join(missing)} not found): {WHERE}")
