"""Reading the files of an output folder for a report: each bad file is an
error naming it and what was expected."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any


class ReportError(ValueError):
    """A folder that cannot be reported: not a known kind, or a file in it unreadable."""


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: cannot be read as JSON ({e})") from None


def read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot be read as CSV ({e})") from None


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as e:
        raise ReportError(f"{path}: cannot be read ({e.strerror or e})") from None


def read_png(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ReportError(f"{path}: cannot be read ({e.strerror or e})") from None


def as_float(text: str | None) -> float | None:
    """A CSV cell as a number (None where empty or not a number)."""
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


SEED_DIR = re.compile(r"seed(\d+)")


def run_dirs(folder: Path) -> list[tuple[str, int, Path]]:
    """The finished runs kept under ``folder/runs/<label>/seed<N>`` (as
    ``compare``, ``evaluate`` and the experiments keep them), as
    ``(label, seed, path)`` sorted by label and seed."""
    out = []
    runs = folder / "runs"
    if not runs.is_dir():
        return []
    for label in sorted(p for p in runs.iterdir() if p.is_dir()):
        for d in label.iterdir():
            m = SEED_DIR.fullmatch(d.name)
            if m and (d / "summary.json").is_file():
                out.append((label.name, int(m.group(1)), d))
    return sorted(out, key=lambda r: (r[0], r[1]))


def plot_files(folder: Path) -> list[Path]:
    """The PNG plots of ``folder``: its own, then those of its sub-folders
    other than the runs' (``runs/``, each run's own plots)."""
    own = sorted(folder.glob("*.png"))
    nested = sorted(p for d in sorted(folder.iterdir()) if d.is_dir() and d.name != "runs"
                    for p in d.rglob("*.png"))
    return [*own, *nested]
