"""The report of an experiment directory (``hrlsched experiment NAME
--out``), read generically so that any experiment renders: results.csv
(one row per policy x setting x seed) as the main table, every other CSV
beside it, every plot, experiment.json's facts and config.yaml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hrlsched.report import page
from hrlsched.report.files import ReportError, plot_files, read_csv, read_json, read_png, read_text
from hrlsched.report.page import Code, Page

MARKERS = ("results.csv",)
ROWS_SHOWN = 2000


def seeds_of(rows: list[dict[str, str]], meta: dict[str, Any]) -> list[int]:
    """The seeds of results.csv's ``seed`` column, else experiment.json's ``seeds``."""
    found = {r["seed"] for r in rows if r.get("seed") not in (None, "")}
    try:
        if found:
            return sorted(int(float(s)) for s in found)
        return sorted(int(s) for s in meta.get("seeds", []))
    except (TypeError, ValueError):
        return []


def build(folder: Path) -> Page:
    from hrlsched.seeds import seeds_text

    meta: dict[str, Any] = {}
    if (folder / "experiment.json").is_file():
        loaded = read_json(folder / "experiment.json")
        if not isinstance(loaded, dict):
            raise ReportError(f"{folder / 'experiment.json'}: expected a JSON object")
        meta = loaded
    rows = read_csv(folder / "results.csv")
    name = str(meta.get("name") or meta.get("experiment") or folder.name)
    seeds = seeds_of(rows, meta)
    facts: list[tuple[str, str | Code]] = [("experiment", name)]
    facts += [(k, str(v)) for k, v in meta.items() if k not in ("name", "experiment", "command", "seeds")
              and isinstance(v, (str, int, float, bool))]
    facts.append(("seeds", seeds_text(seeds) if seeds else "(not recorded)"))
    p = Page(f"Experiment: {name}", str(meta.get("description", "")) or
             "An experiment (hrlsched experiment): every policy it names over one swept factor, paired by seed.",
             facts)
    shown = f"the first {ROWS_SHOWN} of {len(rows)}" if len(rows) > ROWS_SHOWN else f"{len(rows)}"
    p.add("Results", page.csv_table(rows, ROWS_SHOWN, f"results.csv: {shown} rows", table_id="main-table")
          if rows else page.para("results.csv has no rows"))
    p.add("Plots", page.plots([page.figure(read_png(f), str(f.relative_to(folder))) for f in plot_files(folder)]))
    for f in sorted(folder.glob("*.csv")):
        if f.name != "results.csv":
            other = read_csv(f)
            if other:
                p.add(f.name, page.details(f"{f.name}: {len(other)} rows", page.csv_table(other, ROWS_SHOWN)))
    nested = {k: v for k, v in meta.items() if not isinstance(v, (str, int, float, bool)) and k != "seeds"}
    if nested:
        p.add("experiment.json", page.details("the rest of experiment.json",
                                              page.code(json.dumps(nested, indent=2, sort_keys=True))))
    if (folder / "config.yaml").is_file():
        p.add("Config", page.para("config.yaml") + page.code(read_text(folder / "config.yaml")))
    return p


def command(folder: Path) -> str | None:
    """The command experiment.json records, where it records one."""
    if not (folder / "experiment.json").is_file():
        return None
    meta = read_json(folder / "experiment.json")
    c = meta.get("command") if isinstance(meta, dict) else None
    return " ".join(c) if isinstance(c, list) else (str(c) if c else None)
