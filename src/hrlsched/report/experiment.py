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


SHOWN_APART = ("name", "experiment", "title", "description", "command", "version", "seeds")


def metadata(folder: Path) -> dict[str, Any]:
    """experiment.json ({} where there is none)."""
    if not (folder / "experiment.json").is_file():
        return {}
    meta = read_json(folder / "experiment.json")
    if not isinstance(meta, dict):
        raise ReportError(f"{folder / 'experiment.json'}: expected a JSON object")
    return meta


def scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def build(folder: Path) -> Page:
    from hrlsched.report.markdown import to_html
    from hrlsched.seeds import seeds_text

    meta = metadata(folder)
    rows = read_csv(folder / "results.csv")
    name = str(meta.get("experiment") or meta.get("name") or folder.name)
    seeds = seeds_of(rows, meta)
    facts: list[tuple[str, str | Code]] = [("experiment", name)]
    for k, v in meta.items():
        if k in SHOWN_APART:
            continue
        if scalar(v):
            facts.append((k, str(v)))
        elif isinstance(v, list) and v and all(scalar(x) for x in v):
            facts.append((k, ", ".join(map(str, v))))
    facts.append(("seeds", seeds_text(seeds) if seeds else "(not recorded)"))
    lead = str(meta.get("title") or meta.get("description") or "")
    p = Page(f"Experiment: {name}", lead or "An experiment (hrlsched experiment): every policy it names over a "
             "swept factor, paired by seed.", facts)
    for f in sorted(folder.glob("*.md")):
        p.add(f.name, to_html(read_text(f)))
    p.add("Plots", page.plots([page.figure(read_png(f), str(f.relative_to(folder))) for f in plot_files(folder)]))
    shown = f"the first {ROWS_SHOWN} of {len(rows)}" if len(rows) > ROWS_SHOWN else f"{len(rows)}"
    table = (page.csv_table(rows, ROWS_SHOWN, f"results.csv: {shown} rows", table_id="main-table")
             if rows else page.para("results.csv has no rows"))
    p.add("Results", page.details(f"results.csv: one row per policy, setting and seed ({len(rows)} rows)", table,
                                  open_=len(rows) <= 50))
    for f in sorted(folder.glob("*.csv")):
        if f.name != "results.csv":
            other = read_csv(f)
            if other:
                p.add(f.name, page.details(f"{f.name}: {len(other)} rows", page.csv_table(other, ROWS_SHOWN)))
    rest = {k: v for k, v in meta.items() if k not in SHOWN_APART and not scalar(v)
            and not (isinstance(v, list) and v and all(scalar(x) for x in v))}
    if rest:
        p.add("experiment.json", page.details("the rest of experiment.json",
                                              page.code(json.dumps(rest, indent=2, sort_keys=True))))
    if (folder / "config.yaml").is_file():
        p.add("Config", page.para("config.yaml") + page.code(read_text(folder / "config.yaml")))
    return p


def recorded(folder: Path) -> tuple[str, str] | None:
    """The command and the version experiment.json records, where it records either."""
    meta = metadata(folder)
    c, v = meta.get("command") or "", str(meta.get("version") or "")
    if not (c or v):
        return None
    return (" ".join(map(str, c)) if isinstance(c, list) else str(c)), v
