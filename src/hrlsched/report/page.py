"""The HTML of a report: one self-contained page (inline CSS, plots as
base64 PNG data URIs, no script, no link out), whose Content-Security-Policy
forbids any request, so that a page which tried one would show it as an
error in the browser rather than fetch quietly. Every text is escaped."""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass, field
from html import escape

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Laptop width first: a readable column, tables that scroll sideways inside it.
CSS = """
:root { color-scheme: light; --fg: #1d2329; --muted: #5b6670; --line: #d8dee4; --head: #f3f5f7; --accent: #2f5d8a; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff; line-height: 1.45;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 80rem; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.15rem; margin: 2rem 0 .6rem; padding-bottom: .25rem; border-bottom: 1px solid var(--line); }
p.lead { color: var(--muted); margin: 0 0 1rem; }
p.note { color: var(--muted); font-size: .9rem; margin: .4rem 0; }
dl.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .3rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: .85rem; }
pre { background: var(--head); border: 1px solid var(--line); border-radius: 4px; padding: .75rem;
  overflow: auto; max-height: 32rem; margin: .4rem 0; }
.scroll { overflow-x: auto; margin: .4rem 0; border: 1px solid var(--line); border-radius: 4px; width: fit-content; max-width: 100%; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
caption { caption-side: top; text-align: left; color: var(--muted); padding: .4rem .6rem; font-size: .85rem; }
th, td { padding: .35rem .6rem; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; vertical-align: top; }
th { background: var(--head); font-weight: 600; white-space: normal; min-width: 4rem; }
table.compact { width: auto; min-width: 24rem; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.text { white-space: normal; min-width: 12rem; }
tbody tr:nth-child(even) td { background: #fafbfc; }
tbody tr:hover td { background: #eef3f8; }
figure { margin: 1rem 0; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
.plots figure.wide { grid-column: 1 / -1; }
figcaption { color: var(--muted); font-size: .85rem; margin-top: .3rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 30rem), 1fr)); gap: 0 1.25rem; }
details { margin: .5rem 0; }
summary { cursor: pointer; color: var(--accent); }
footer { color: var(--muted); font-size: .8rem; margin-top: 3rem; }
"""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass(frozen=True)
class Num:
    """A number in a table: the figure a person reads (``text``) and the
    value it shows (``value``, in the unit of the file it came from), kept
    in the cell's ``data-value`` so that a reader can check one against the
    other."""

    value: float | None
    text: str


@dataclass(frozen=True)
class Head:
    """A column: its label, and where it shows a file's column, that
    column's name (``key``) and the factor its figures are divided by
    (``scale``, e.g. 3600 for seconds shown in hours)."""

    label: str
    key: str | None = None
    scale: float = 1.0
    numeric: bool = False


Cell = str | Num


def number(v: float | None, scale: float = 1.0) -> str:
    """``v / scale`` to four significant digits (thousands separated); "-"
    for a missing value."""
    if v is None or not math.isfinite(v):
        return "-"
    x = v / scale
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if x == int(x):
        return f"{int(x)}"
    return f"{x:.4g}"


def num(v: float | None, scale: float = 1.0, half: float | None = None) -> Num:
    """A table figure, with its 95% half-width where there is one."""
    text = number(v, scale)
    if text != "-" and half is not None and math.isfinite(half):
        text += f" ± {number(half, scale)}"
    return Num(v if v is not None and math.isfinite(v) else None, text)


def table(heads: list[Head], rows: list[list[Cell]], caption: str = "", table_id: str = "",
          compact: bool = False) -> str:
    """A table in a sideways-scrolling box; numbers right-aligned; a
    ``compact`` one as narrow as its cells (a short list of figures)."""
    attr = (f' id="{escape(table_id)}"' if table_id else "") + (' class="compact"' if compact else "")
    out = [f'<div class="scroll"><table{attr}>']
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    ths = []
    for h in heads:
        data = "" if h.key is None else f' data-key="{escape(h.key)}" data-scale="{h.scale:g}"'
        cls = ' class="num"' if h.numeric else ""
        ths.append(f'<th scope="col"{cls}{data}>{escape(h.label)}</th>')
    out.append("<thead><tr>" + "".join(ths) + "</tr></thead><tbody>")
    for row in rows:
        tds = []
        for h, c in zip(heads, row):
            if isinstance(c, Num):
                value = "" if c.value is None else f"{c.value!r}"
                tds.append(f'<td class="num" data-value="{value}">{escape(c.text)}</td>')
            else:  # a text in a column of numbers ("-", "1.2 ± 0.3") is aligned as they are
                cls = ' class="num"' if h.numeric else (' class="text"' if len(c) > 40 else "")
                tds.append(f"<td{cls}>{escape(c)}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def csv_table(rows: list[dict[str, str]], limit: int | None = None, caption: str = "", table_id: str = "") -> str:
    """Rows of a CSV file as they are (numbers to four digits, each cell's
    value kept), the first ``limit`` of them."""
    from hrlsched.report.files import as_float

    cols = list(rows[0]) if rows else []
    shown = rows if limit is None else rows[:limit]
    numeric = {c: all(as_float(r.get(c)) is not None or not r.get(c) for r in shown) for c in cols}
    cells = [[num(as_float(r.get(c))) if numeric[c] else (r.get(c) or "") for c in cols] for r in shown]
    return table([Head(c, c, numeric=numeric[c]) for c in cols], cells, caption, table_id)


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height of a PNG (its IHDR chunk); ``ValueError`` where it is not one."""
    if not png.startswith(PNG_SIGNATURE) or len(png) < 24 or png[12:16] != b"IHDR":
        raise ValueError("not a PNG image (expected the PNG signature and its IHDR chunk)")
    return struct.unpack(">II", png[16:24])


def figure(png: bytes, caption: str) -> str:
    """A plot embedded as a data URI; a wide one (panels side by side)
    takes the whole row of plots. ``ValueError`` where ``png`` is not a PNG."""
    try:
        w, h = png_size(png)
    except ValueError as e:
        raise ValueError(f"{caption}: {e}") from None
    data = base64.b64encode(png).decode("ascii")
    wide = ' class="wide"' if w >= 1.8 * h and w > 800 else ""  # more than half a laptop screen
    return (f'<figure{wide}><img src="data:image/png;base64,{data}" width="{w}" height="{h}" alt="{escape(caption)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def plots(figures: list[str]) -> str:
    return '<div class="plots">' + "\n".join(figures) + "</div>" if figures else ""


def code(text: str) -> str:
    return f"<pre><code>{escape(text, quote=False)}</code></pre>"


def para(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{escape(text)}</p>'


def details(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>{body}</details>"


@dataclass(frozen=True)
class Code:
    """A fact shown as code: a command line, a path."""

    text: str


def facts(items: list[tuple[str, str | Code]]) -> str:
    """Label / value pairs."""
    rows = [f"<dt>{escape(k)}</dt><dd>"
            + (f"<code>{escape(v.text)}</code>" if isinstance(v, Code) else escape(v)) + "</dd>"
            for k, v in items]
    return '<dl class="facts">' + "".join(rows) + "</dl>"


@dataclass
class Page:
    """A report page: a title, a line under it, the facts of where its
    figures came from (shown first), and sections in order."""

    title: str
    lead: str = ""
    facts: list[tuple[str, str | Code]] = field(default_factory=list)
    sections: list[tuple[str, str]] = field(default_factory=list)

    def add(self, heading: str, body: str) -> None:
        if body:
            self.sections.append((heading, body))

    def html(self, footer: str = "") -> str:
        body = [f"<h1>{escape(self.title)}</h1>"]
        if self.lead:
            body.append(para(self.lead, "lead"))
        parts = [("Where this comes from", facts(self.facts))] if self.facts else []
        for heading, html in [*parts, *self.sections]:
            body.append(f"<section><h2>{escape(heading)}</h2>\n{html}\n</section>")
        if footer:
            body.append(f"<footer>{escape(footer)}</footer>")
        return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
                '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
                f"<title>{escape(self.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
                + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
