"""The tables of a training run (``metrics.csv``, ``bc.csv``): CSV with a
header, a missing value written as the table's ``missing``."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hrlsched.io import atomic_write


class CSVLogger:
    """A table written a row at a time, as training goes (``metrics.csv``):
    each row is appended and the file closed, so that a killed run keeps
    every row written before; a new file gets the header first, a resumed
    run's rows follow its earlier ones."""

    def __init__(self, path: str | Path, fields: Sequence[str], missing: Any = "") -> None:
        self.path, self.fields, self.missing = Path(path), list(fields), missing

    def append(self, row: dict[str, Any]) -> None:
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.fields)
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, self.missing) for k in self.fields})


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]], fields: Sequence[str], missing: Any = "") -> None:
    """A whole table at once (``bc.csv``), written whole (temporary file,
    then rename)."""

    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(fields))
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k, missing) for k in fields})

    atomic_write(path, write)
