"""The checkpoints shipped in the package, by name: a file's stem under
``agent/checkpoints`` (the hrl agent's: ``hrl-default``, ``hrl-hetero``,
...) or ``rivals/checkpoints`` (DL2's and Harmony's), so that a user of an
installed package names one without its path (``--checkpoint
hrl-hetero``). Torch-free, as the commands that resolve a name may run no
learned policy."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDERS = ("agent/checkpoints", "rivals/checkpoints")


def shipped_checkpoint(name: str) -> Path:
    """The checkpoint shipped in the package at ``name``, a path below
    ``src/hrlsched`` (package data, ``pyproject.toml``), e.g.
    ``agent/checkpoints/hrl-default.pt``."""
    return Path(str(resources.files("hrlsched") / name))


def shipped_names() -> dict[str, Path]:
    """Every shipped checkpoint by name (its file's stem)."""
    return {p.stem: p for folder in FOLDERS for p in sorted(shipped_checkpoint(folder).glob("*.pt"))}


def checkpoint_path(value: str | Path) -> Path:
    """``value`` as a checkpoint file: a shipped checkpoint's name (no folder,
    no suffix, and no file of that name here) is its file in the package;
    anything else is a path, as given (a missing file is the loader's
    error, which lists the names)."""
    p = Path(value)
    if p.suffix or len(p.parts) != 1 or p.exists():
        return p
    return shipped_names().get(p.name, p)
