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
