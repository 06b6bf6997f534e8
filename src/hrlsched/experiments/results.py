"""The project's results pages, generated from experiment outputs
(``hrlsched results``), never edited by hand:

- ``docs/results.md``: every policy of ``hrlsched experiment main`` on its five
  workloads, from that experiment's ``results.csv`` (mean ± 95% interval over
  the seeds, oracles marked, the lower bound, the best of each column in bold);
- the README's results tables: the agent, its rules, its hint and the best
  other heuristic per scenario, from the ``evaluation.csv`` of each
  ``hrlsched evaluate`` folder (``EVALUATION_TABLES`` names them).

Each file keeps what it has outside its block (a line starting with
``BEGIN``, which names the command that wrote the block, up to the line
``END``): the README's prose, the results page's reading. In the README's
block only the tables (runs of lines starting with ``|``) are replaced, so
the prose between them is kept too. Files are written whole (``hrlsched.io``)."""

from __future__ import annotations

import csv
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hrlsched.experiments.ablation import HINT_ALONE, RULES_ONLY
from hrlsched.experiments.compare import BOUND
from hrlsched.experiments.evaluate import AGENT
from hrlsched.experiments.evaluate import COLUMNS as EVALUATION_COLUMNS
from hrlsched.experiments.experiment import COLUMNS as EXPERIMENT_COLUMNS
from hrlsched.experiments.experiment import mean_ci, read_results
from hrlsched.seeds import seeds_text

BEGIN = "<!-- results:begin"
END = "<!-- results:end -->"
HOUR = 3600.0


class ResultsError(ValueError):
    """An output folder or a page the results cannot be made from."""


# ------------------------------------------------------------------ the block of a page

def _begin_line(command: str, what: str) -> str:
    return f"{BEGIN}; made by: {command} ({what}) -->\n"


def _find_block(text: str, name: str) -> tuple[int, int, list[str]]:
    """The lines of ``text`` and the indices of its begin and end lines."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.startswith(BEGIN)]
    ends = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == END]
    expected = f"expected one line starting with {BEGIN!r} and, below it, one line {END!r}"
    if len(begins) != 1 or len(ends) != 1:
        raise ResultsError(f"{name}: {len(begins)} begin and {len(ends)} end marker lines; {expected}")
    if ends[0] < begins[0]:
        raise ResultsError(f"{name}: the end marker comes before the begin marker; {expected}")
    return begins[0], ends[0], lines


def replace_block(text: str, body: str, command: str, name: str) -> str:
    """``text`` with its block replaced by ``body`` under a begin line naming
    ``command``; every byte outside the block kept."""
    b, e, lines = _find_block(text, name)
    inner = body if body.endswith("\n") else body + "\n"
    return "".join([*lines[:b], _begin_line(command, "to results:end: its output, rewritten by that command"),
                    inner, *lines[e:]])


def replace_tables(text: str, tables: Sequence[str], command: str, name: str) -> str:
    """``text`` with the tables of its block (each a run of lines starting
    with ``|``) replaced by ``tables``, in order, under a begin line naming
    ``command``; the prose between them and every byte outside the block kept."""
    b, e, lines = _find_block(text, name)
    out: list[str] = []
    runs = 0
    i = b + 1
    while i < e:
        if lines[i].startswith("|"):
            while i < e and lines[i].startswith("|"):
                i += 1
            if runs < len(tables):
                t = tables[runs]
                out.append(t if t.endswith("\n") else t + "\n")
            runs += 1
        else:
            out.append(lines[i])
            i += 1
    if runs != len(tables):
        raise ResultsError(f"{name}: {runs} table(s) between the results markers; expected {len(tables)} "
                           "(a table: a run of lines starting with '|')")
    what = "the tables up to results:end are its output; the prose between them is kept"
    return "".join([*lines[:b], _begin_line(command, what), *out, *lines[e:]])


def made_by(text: str) -> str | None:
    """The command a page's block names (None: no block)."""
    for line in text.splitlines():
        if line.startswith(BEGIN) and "made by: " in line:
            return line.split("made by: ", 1)[1].rsplit(" (", 1)[0]
    return None


def _bold_best(cells: list[str], means: list[float], higher: bool = False) -> list[str]:
    """``cells`` with those whose mean, as shown, is the best in bold (ties all)."""
    shown = [m for m in means if m == m]
    if not shown:
        return cells
    best = max(shown) if higher else min(shown)
    return [f"**{c}**" if m == best else c for c, m in zip(cells, means, strict=True)]


# ------------------------------------------------------------------ docs/results.md, from experiment main

@dataclass(frozen=True)
class Metric:
    column: str  # results.csv's
    label: str
    scale: float
    digits: int
    higher_is_better: bool = False


METRICS = (Metric("avg_jct_s", "avg JCT (h)", HOUR, 3), Metric("p95_jct_s", "p95 JCT (h)", HOUR, 2),
           Metric("p99_jct_s", "p99 JCT (h)", HOUR, 2), Metric("makespan_s", "makespan (h)", HOUR, 2),
           Metric("gpu_util_mean", "GPU util", 1.0, 3, higher_is_better=True),
           Metric("restarts_total", "restarts", 1.0, 0), Metric("max_ftf", "max FTF", 1.0, 2))
LOWER_BOUND = "lower_bound_avg_jct_s"


def read_experiment(folder: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``experiment.json`` and the rows of ``results.csv`` of an output
    folder of ``hrlsched experiment main``, checked."""
    folder = Path(folder)
    expected = "expected the output folder of `hrlsched experiment main` (experiment.json, results.csv)"
    if not folder.is_dir():
        raise ResultsError(f"{folder}: no such folder; {expected}")
    for f in ("experiment.json", "results.csv"):
        if not (folder / f).is_file():
            raise ResultsError(f"{folder}: no {f}; {expected}")
    try:
        meta = json.loads((folder / "experiment.json").read_text())
    except ValueError as e:
        raise ResultsError(f"{folder / 'experiment.json'}: not JSON ({e}); {expected}") from None
    if meta.get("experiment") != "main":
        raise ResultsError(f"{folder}: experiment {meta.get('experiment')!r}; {expected}")
    with open(folder / "results.csv") as fh:
        header = next(csv.reader(fh), [])
    needed = ["factor", "value", "policy", "seed", "information", "oracle", *(m.column for m in METRICS), LOWER_BOUND]
    missing = [c for c in needed if c not in header]
    if missing:
        raise ResultsError(f"{folder / 'results.csv'}: no column {', '.join(missing)}; expected the columns of "
                           f"`hrlsched experiment`: {', '.join(EXPERIMENT_COLUMNS)}")
    rows = read_results(folder / "results.csv")
    if not rows:
        raise ResultsError(f"{folder / 'results.csv'}: no rows; {expected}")
    return meta, rows


def _pm(values: Sequence[float | None], m: Metric) -> tuple[str, float]:
    """``mean ± half-width`` of ``values`` as shown, and the mean as shown (nan: none)."""
    v = [x for x in values if x is not None]
    if not v:
        return "-", float("nan")
    mean, half = mean_ci(v)
    shown = round(mean / m.scale, m.digits)
    text = f"{mean / m.scale:.{m.digits}f}" + ("" if half != half else f" ± {half / m.scale:.{m.digits}f}")
    return text, shown


def _mark(row: dict[str, Any]) -> str:
    if not row["oracle"]:
        return ""
    return " (oracle)" if row["information"] == "truth" else " (oracle\\*)"


def _settings(rows: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["value"]) for r in rows))


def _grouped(rows: Sequence[dict[str, Any]], folder: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The rows by (setting, policy); every cell must have the same seeds."""
    g: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        g.setdefault((str(r["value"]), r["policy"]), []).append(r)
    seeds = {k: sorted(int(r["seed"]) for r in v) for k, v in g.items()}
    first = next(iter(seeds.values()))
    for (setting, policy), s in seeds.items():
        if s != first:
            raise ResultsError(f"{folder / 'results.csv'}: {policy} on {setting} has seeds {s}; expected the seeds "
                               f"of every other cell, {first}")
    for setting in _settings(rows):
        for policy in dict.fromkeys(r["policy"] for r in rows):
            if (setting, policy) not in g:
                raise ResultsError(f"{folder / 'results.csv'}: no row of {policy} on {setting}; expected every "
                                   "policy on every setting")
    return g


def experiment_body(folder: str | Path, command: str) -> str:
    """The generated part of ``docs/results.md`` from ``folder`` (an output
    of ``hrlsched experiment main``): an overview of average JCT, then, per
    workload, every metric; ``command`` is named as what made it."""
    folder = Path(folder)
    meta, rows = read_experiment(folder)
    g = _grouped(rows, folder)
    settings = _settings(rows)
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    seeds = sorted({int(r["seed"]) for r in rows})
    # a policy's mark per setting (a predictor with an error there makes it no oracle there)
    marks = {(str(r["value"]), r["policy"]): _mark(r) for r in rows}
    same = {p: len({marks[(s, p)] for s in settings}) == 1 for p in policies}
    avg = METRICS[0]
    inv = meta.get("invocations", [])
    wall = sum(float(i.get("wall_s", 0.0)) for i in inv) / 60
    ran = sum(int(i.get("runs_run", 0)) for i in inv)
    runs = meta.get("runs", "?")
    size = "quick size" if meta.get("quick") else "full size"
    if ran == runs:
        times = f"{runs} runs in {wall:.1f} minutes of wall time"
    elif isinstance(runs, int) and ran > runs:  # a later invocation ran some again (a changed checkpoint)
        times = f"{runs} runs in {wall:.1f} minutes of wall time, {ran - runs} of them run again by a later invocation"
    else:
        times = (f"{runs} runs, {ran} of them run by the invocations recorded there, in {wall:.1f} minutes of wall "
                 "time; the others were kept from an earlier output of the same runs")
    lines = ["", f"Made by `{command}` from `{folder.as_posix()}`: the output of `{meta.get('command', '?')}` "
             f"(hrlsched {meta.get('version', '?')}, {size}, {meta.get('workers', '?')} workers: {times}).", "",
             f"Seeds {seeds_text(seeds)} (the same jobs for every policy on a seed); each cell is the mean ± 95% "
             "interval over the seeds (none with one seed). (oracle): given each job's true remaining work; "
             "(oracle\\*): reads the predictor's remaining work, which has no error in these scenarios. Lower "
             "bound: each job alone at its best allocation (`hrlsched bound`). The best of each column in bold "
             "(GPU utilisation: the highest; the others: the lowest).", "",
             "## Average JCT on every workload", "",
             "Average JCT in hours; policies in the order of `hrlsched policies`.", "",
             "| policy | " + " | ".join(f"`{s}`" for s in settings) + " |", "|---|" + "---|" * len(settings)]
    cols = {s: [_pm([r[avg.column] for r in g[(s, p)]], avg) for p in policies] for s in settings}
    bold = {s: _bold_best([c for c, _ in cols[s]], [m for _, m in cols[s]]) for s in settings}
    for i, p in enumerate(policies):
        mark = marks[(settings[0], p)] if same[p] else ""
        lines.append(f"| {p}{mark} | " + " | ".join(
            bold[s][i] + ("" if same[p] else marks[(s, p)]) for s in settings) + " |")
    lines.append("| lower bound | " + " | ".join(
        _pm([r[LOWER_BOUND] for r in g[(s, policies[0])]], avg)[0] for s in settings) + " |")
    for s in settings:
        order = sorted(policies, key=lambda p, s=s: _sort_key(g[(s, p)], avg))
        lines += ["", f"## `{s}`", "", f"Every policy on `{s}`, fastest average JCT first.", "",
                  "| policy | " + " | ".join(m.label for m in METRICS) + " |", "|---|" + "---|" * len(METRICS)]
        table = []
        for m in METRICS:
            cells = [_pm([r[m.column] for r in g[(s, p)]], m) for p in order]
            table.append(_bold_best([c for c, _ in cells], [v for _, v in cells], m.higher_is_better))
        for i, p in enumerate(order):
            lines.append(f"| {p}{marks[(s, p)]} | " + " | ".join(col[i] for col in table) + " |")
        bound = _pm([r[LOWER_BOUND] for r in g[(s, order[0])]], avg)[0]
        lines.append(f"| lower bound | {bound} |" + " - |" * (len(METRICS) - 1))
    return "\n".join(lines) + "\n\n"


def _sort_key(rows: list[dict[str, Any]], m: Metric) -> float:
    v = [r[m.column] for r in rows if r[m.column] is not None]
    return mean_ci(v)[0] if v else float("inf")


def write_results_page(page: str | Path, folder: str | Path, command: str) -> Path:
    """Rewrite the block of ``page`` (a new page: a title and the block) from
    the experiment output ``folder``; what is outside the block is kept."""
    from hrlsched.io import write_text

    page = Path(page)
    body = experiment_body(folder, command)
    text = page.read_text() if page.exists() else f"# Results\n\n{BEGIN} -->\n{END}\n"
    return write_text(page, replace_block(text, body, command, str(page)))


# ------------------------------------------------------------------ the README's tables, from hrlsched evaluate

# The heuristic the agent's rules decide as (its rules-only ablation is the same to the bit): "its rules";
# an evaluation names it (``rules_heuristic``; this where an older one does not).
RULES_HEURISTIC = "optimus-tuned"


@dataclass(frozen=True)
class Case:
    """A row of the README's tables: the evaluation page
    ``docs/evaluation/<page>.md``, made from the folder ``evaluate-<page>``,
    and the scenario in a few words."""

    page: str
    about: str


DEFAULT_ABOUT = "64 GPUs, 200 jobs (the agent's training generator)"
COMM_ABOUT = "`default` with 10 Gbit/s NICs, 4 GPUs per PCIe switch"
# The README's tables: with the noisy predictor (work_noise 0.7), then with the scenarios' exact one.
EVALUATION_TABLES: tuple[tuple[Case, ...], ...] = (
    (Case("default-noisy", DEFAULT_ABOUT), Case("comm-noisy", COMM_ABOUT)),
    (Case("default", DEFAULT_ABOUT), Case("comm", COMM_ABOUT),
     Case("hetero", "V100, P100 and K80 servers (Gavel's setting)"),
     Case("ps-small", "PS jobs of 1-4 GPUs sharing servers (Harmony's setting)"),
     Case("pollux-w6", "Pollux workload 6, measured speeds (one trace: the seeds do not change it)"),
     Case("itp-c01", "7 days of ITP cluster01"),
     Case("itp-c05", "7 days of ITP cluster05, 16 GPUs"),
     Case("itp-c07", "2 days of ITP cluster07, 320 GPUs"),
     Case("large", "`default` at 256 GPUs, 800 jobs")),
)
EVALUATION_HEADER = ("| scenario | seeds | agent (`hrl`) | its rules (`{rules}`) | its hint alone | "
                     "best other heuristic | lower bound |\n|---|---|---|---|---|---|---|\n")


def read_evaluation(folder: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """``evaluation.json`` and the rows of ``evaluation.csv`` (by row name) of
    an output folder of ``hrlsched evaluate``, checked."""
    folder = Path(folder)
    expected = "expected the output folder of `hrlsched evaluate` (evaluation.csv, evaluation.json)"
    for f in ("evaluation.csv", "evaluation.json"):
        if not (folder / f).is_file():
            raise ResultsError(f"{folder}: no {f}; {expected}")
    try:
        meta = json.loads((folder / "evaluation.json").read_text())
    except ValueError as e:
        raise ResultsError(f"{folder / 'evaluation.json'}: not JSON ({e}); {expected}") from None
    for k in ("scenario", "seeds", "overrides"):
        if k not in meta:
            raise ResultsError(f"{folder / 'evaluation.json'}: no field {k!r}; {expected}")
    with open(folder / "evaluation.csv") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("row", "kind", "oracle", "avg_jct_s") if c not in (reader.fieldnames or [])]
        if missing:
            raise ResultsError(f"{folder / 'evaluation.csv'}: no column {', '.join(missing)}; expected the columns "
                               f"of `hrlsched evaluate`: {', '.join(EVALUATION_COLUMNS)}, seeds")
        rows = {r["row"]: r for r in reader}
    for name in (AGENT, RULES_ONLY, HINT_ALONE, BOUND):
        if name not in rows:
            raise ResultsError(f"{folder / 'evaluation.csv'}: no row {name!r}; expected the agent, its ablations "
                               "(rules-only, hint-alone) and the lower bound (`hrlsched evaluate` without --no-ablate)")
    rules = meta.get("rules_heuristic") or RULES_HEURISTIC
    if not any(r["kind"] == "heuristic" and n != rules for n, r in rows.items()):
        raise ResultsError(f"{folder / 'evaluation.csv'}: no heuristic but {rules}; expected others")
    return meta, rows


def _page_command(page: Path) -> list[str]:
    """The words of the ``hrlsched evaluate`` command an evaluation page names."""
    if not page.is_file():
        raise ResultsError(f"{page}: no such page; expected the page of `hrlsched evaluate ... --markdown {page}`")
    first = page.read_text().split("\n", 1)[0]
    if not first.startswith("<!-- made by: hrlsched evaluate "):
        raise ResultsError(f"{page}: its first line is not '<!-- made by: hrlsched evaluate ... -->'")
    return shlex.split(first.removeprefix("<!-- made by: ").removesuffix("-->"))


def _options(words: list[str], name: str) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == name]


def _check_page(page: Path, folder: Path, meta: dict[str, Any]) -> None:
    """The page's command ran this folder's scenario, overrides and seeds."""
    from hrlsched.seeds import parse_seeds

    words = _page_command(page)
    said = {"scenario": _options(words, "--scenario"), "overrides": _options(words, "--set"),
            "seeds": [parse_seeds(s) for s in _options(words, "--seeds")]}
    found = {"scenario": [meta["scenario"]], "overrides": list(meta["overrides"]), "seeds": [list(meta["seeds"])]}
    outs = [Path(o).name for o in _options(words, "--out")]
    if outs != [folder.name]:
        raise ResultsError(f"{folder}: {page} was made with --out {' '.join(outs) or '(none)'} "
                           f"({' '.join(words)}); expected a folder named {folder.name}")
    for k in said:
        if said[k] != found[k]:
            raise ResultsError(f"{folder}: {k} {found[k]}, but {page} was made with {said[k]} "
                               f"({' '.join(words)}); expected the folder that command wrote")


def _hours(row: dict[str, str], folder: Path) -> float:
    try:
        return round(float(row["avg_jct_s"]) / HOUR, 3)
    except ValueError:
        raise ResultsError(f"{folder / 'evaluation.csv'}: row {row['row']!r}: avg_jct_s {row['avg_jct_s']!r}; "
                           "expected a number of seconds") from None


def evaluation_row(case: Case, evaluations: Path, pages: Path, link: str) -> tuple[str, str]:
    """One row of a README table from ``evaluations/evaluate-<page>``, its
    scenario cell linking ``link``, and the heuristic its agent's rules are."""
    folder = evaluations / f"evaluate-{case.page}"
    page = pages / f"{case.page}.md"
    if not folder.is_dir():
        made = " ".join(_page_command(page)) if page.is_file() else f"hrlsched evaluate ... --out {folder}"
        raise ResultsError(f"{folder}: no such folder; expected the output of `hrlsched evaluate` "
                           f"({page.name} was made by: {made})")
    meta, rows = read_evaluation(folder)
    _check_page(page, folder, meta)
    rules = meta.get("rules_heuristic") or RULES_HEURISTIC
    others = [(n, r) for n, r in rows.items() if r["kind"] == "heuristic" and n != rules]
    best_name, best = min(others, key=lambda nr: float(nr[1]["avg_jct_s"]))
    values = [_hours(rows[n], folder) for n in (AGENT, RULES_ONLY, HINT_ALONE)] + [_hours(best, folder)]
    cells = _bold_best([f"{v:.3f}" for v in values], values)
    oracle = ", oracle" if best["oracle"] == "true" else ""
    cells[3] += f" ({best_name}{oracle})"
    return (f"| [`{meta['scenario']}`]({link}): {case.about} | {seeds_text(list(meta['seeds']))} | "
            + " | ".join(cells) + f" | {_hours(rows[BOUND], folder):.3f} |\n"), rules


def _finished(folder: Path) -> bool:
    """Whether ``folder`` holds a finished evaluation (``evaluate`` writes its tables last)."""
    return (folder / "evaluation.csv").is_file() and (folder / "evaluation.json").is_file()


def _kept_rows(readme_text: str) -> dict[str, str]:
    """The rows of the tables in ``readme_text``'s results block, by the page their scenario cell links."""
    if BEGIN not in readme_text:
        return {}
    b, e, lines = _find_block(readme_text, "README")
    out = {}
    for line in lines[b + 1:e]:
        m = re.match(r"\| \[`[^`]*`\]\(docs/evaluation/([^)]+)\.md\)", line)
        if m:
            out[m.group(1)] = line if line.endswith("\n") else line + "\n"
    return out


def evaluation_tables(evaluations: str | Path, readme: str | Path,
                      tables: Sequence[Sequence[Case]] | None = None,
                      kept: dict[str, str] | None = None) -> list[str]:
    """The README's tables (markdown; ``tables``: their rows, default
    ``EVALUATION_TABLES``) from the evaluation folders under ``evaluations``;
    each row links its page under ``docs/evaluation`` beside ``readme``.
    ``kept``: rows by page, each written by an earlier run of this command,
    used as they are where a case has no finished evaluation (no folder, or
    one without its tables yet: an evaluation under way)."""
    tables = EVALUATION_TABLES if tables is None else tables
    evaluations = Path(evaluations)
    if not evaluations.is_dir():
        raise ResultsError(f"{evaluations}: no such folder; expected the folder holding the evaluate-<case> "
                           "folders of `hrlsched evaluate`")
    pages = Path(readme).parent / "docs" / "evaluation"
    made: list[tuple[str, set[str]]] = []
    for cases in tables:
        rows: list[tuple[str, str | None]] = []
        for c in cases:
            if kept and c.page in kept and not _finished(evaluations / f"evaluate-{c.page}"):
                rows.append((kept[c.page], None))
                continue
            rows.append(evaluation_row(c, evaluations, pages, f"docs/evaluation/{c.page}.md"))
        names = {rules for _, rules in rows if rules is not None}
        if len(names) > 1:
            raise ResultsError(f"{evaluations}: the evaluations of one table are of agents with other rules "
                               f"({', '.join(sorted(names))}); expected one agent's")
        made.append(("".join(r for r, _ in rows), names))
    every = set().union(*(names for _, names in made))
    out = []
    for body, names in made:
        if not names and len(every) != 1:  # (a table of kept rows alone is headed by the others' agent)
            raise ResultsError(f"{evaluations}: " + ("no evaluate-<case> folder for any row" if not every else
                               f"a table of kept rows beside tables of agents with other rules "
                               f"({', '.join(sorted(every))})") + "; expected a finished evaluation of one of its rows")
        out.append(EVALUATION_HEADER.format(rules=next(iter(names or every))) + body)
    return out


def write_readme_tables(readme: str | Path, evaluations: str | Path, command: str) -> tuple[Path, list[str]]:
    """Rewrite the tables of ``readme``'s block from the evaluation folders,
    a row without a finished evaluation kept as an earlier run of the command wrote
    it (each row links its page, which names the evaluation that made it);
    everything else in the file is kept. Returns the file and the kept rows' pages."""
    from hrlsched.io import write_text

    readme = Path(readme)
    if not readme.is_file():
        raise ResultsError(f"{readme}: no such file; expected the README whose results tables to rewrite")
    text = readme.read_text()
    kept = _kept_rows(text)
    tables = evaluation_tables(evaluations, readme, kept=kept)
    used = [c.page for cases in EVALUATION_TABLES for c in cases
            if c.page in kept and not _finished(Path(evaluations) / f"evaluate-{c.page}")]
    return write_text(readme, replace_tables(text, tables, command, str(readme))), used
