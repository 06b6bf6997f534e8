"""The markdown that commands write beside their outputs (an experiment's
summary.md: lines of text and pipe tables) as HTML for a report: headings,
paragraphs, lists, tables, **bold** and `code`. A link keeps its text only
(the page links nowhere) and an image reference is dropped (the page embeds
the folder's plots itself)."""

from __future__ import annotations

import re
from html import escape

from hrlsched.report import page

NUMERIC = re.compile(r"^[-+−]?\d[\d,.]*(?:e[-+]?\d+)?(?:\s*±\s*[\d,.]+(?:e[-+]?\d+)?)?%?$|^-$")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def plain(text: str) -> str:
    """``text`` without markdown's marks (a table cell)."""
    text = LINK.sub(lambda m: "" if m.group(0).startswith("!") else m.group(1), text)
    return text.replace("**", "").replace("`", "").replace("\\|", "|").strip()


def inline(text: str) -> str:
    """``text`` as HTML: escaped, with ``code`` and **bold**."""
    text = escape(LINK.sub(lambda m: "" if m.group(0).startswith("!") else m.group(1), text), quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def _cells(line: str) -> list[str]:
    return [plain(c) for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _table(lines: list[str]) -> str:
    head = _cells(lines[0])
    rows = [_cells(x) for x in lines[1:] if not re.fullmatch(r"\|?[\s:|-]+\|?", x.strip())]
    rows = [r + [""] * (len(head) - len(r)) for r in rows]
    numeric = [i > 0 and all(NUMERIC.match(r[i]) for r in rows) for i in range(len(head))]
    return page.table([page.Head(h, numeric=numeric[i]) for i, h in enumerate(head)],
                      [list(r[:len(head)]) for r in rows])


def to_html(text: str) -> str:
    out: list[str] = []
    para: list[str] = []
    lines = re.sub(r"<!--.*?-->", "", text, flags=re.S).splitlines()

    def flush() -> None:
        if para:
            out.append(f"<p>{inline(' '.join(para))}</p>")
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.lstrip().startswith("|"):
            flush()
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if line.startswith("#"):
            flush()
            out.append(f"<h3>{inline(line.lstrip('#').strip())}</h3>")
        elif line.lstrip().startswith(("- ", "* ")):
            flush()
            items = []
            while i < len(lines) and lines[i].lstrip().startswith(("- ", "* ")):
                items.append(f"<li>{inline(lines[i].lstrip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif not line.strip():
            flush()
        else:
            para.append(line.strip())
        i += 1
    flush()
    return "\n".join(out)
