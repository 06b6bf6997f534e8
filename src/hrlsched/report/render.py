"""Which kind a directory is (by the files it holds), and its page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hrlsched.report import comparison, evaluation, experiment, run
from hrlsched.report.files import ReportError
from hrlsched.report.page import Code, Page

# In the order they are tried: an experiment or an evaluation keeps runs too,
# and a run's two files are the least specific.
KINDS: list[tuple[str, tuple[str, ...], str, Callable[[Path], Page]]] = [
    ("experiment", experiment.MARKERS, "hrlsched experiment --out", experiment.build),
    ("evaluation", evaluation.MARKERS, "hrlsched evaluate --out", evaluation.build),
    ("comparison", comparison.MARKERS, "hrlsched compare --out", comparison.build),
    ("run", run.MARKERS, "hrlsched simulate --out", run.build),
]

REPORT_FILE = "report.html"


def kind_of(folder: Path) -> str:
    """The kind of ``folder`` (``ReportError`` naming it and what each kind holds)."""
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "no such directory"
        raise ReportError(f"{folder}: {what}; expected the output folder of a run, a comparison, "
                          "an evaluation or an experiment")
    for name, markers, _, _ in KINDS:
        if all((folder / m).is_file() for m in markers):
            return name
    expected = "; ".join(f"{' and '.join(m)} ({'an' if n[0] in 'aeiou' else 'a'} {n}: {cmd})"
                         for n, m, cmd, _ in KINDS)
    raise ReportError(f"{folder}: not a directory hrlsched report knows; expected one of: {expected}")


def command_facts(folder: Path) -> list[tuple[str, str | Code]]:
    """The command that made ``folder`` and the versions that made and render it."""
    from hrlsched.provenance import read_command, version

    rec = read_command(folder) or experiment.recorded(folder)
    whole = folder.resolve()
    if rec is None and whole.parent.parent.name == "runs":  # a run kept by a comparison, an evaluation, ...
        parent = read_command(whole.parents[2])
        if parent is not None:
            rec = (f"{parent[0]}  (this is one of its runs)", parent[1])
    cmd, made_by = rec if rec else ("", "")
    return [("command", Code(cmd) if cmd else "not recorded (made before hrlsched wrote command.txt)"),
            ("made by", f"hrlsched {made_by}" if made_by else "not recorded"),
            ("rendered by", f"hrlsched {version()}")]


def render(folder: str | Path) -> str:
    """The report page of ``folder`` as HTML."""
    folder = Path(folder)
    kind = kind_of(folder)
    build = next(b for n, _, _, b in KINDS if n == kind)
    p = build(folder)
    p.facts = [("kind", kind), ("folder", Code(str(folder))), *p.facts, *command_facts(folder)]
    return p.html(footer=f"hrlsched report {folder}: a page with no external requests; "
                         "plots embedded as PNG images.")


def write_report(folder: str | Path, out: str | Path | None = None) -> Path:
    """Render ``folder``'s report to ``out`` (default ``folder/report.html``), written whole."""
    from hrlsched.io import write_text

    html = render(folder)
    return write_text(Path(out) if out is not None else Path(folder) / REPORT_FILE, html)
