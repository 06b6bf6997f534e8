"""The README and docs/ stay true to the code: every `hrlsched` command the
README shows parses, every relative link in README.md and docs/*.md reaches a
file (and a heading, where it names one), and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hrlsched.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 260

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
# `hrlsched` or `.venv/bin/hrlsched` as a word followed by its arguments; not
# `src/hrlsched/...` or `hrlsched.envs`, where a path or a module is meant.
COMMAND = re.compile(r"(?:^|(?<=[\s$(]))(?:\.venv/bin/)?hrlsched[ \t]+(\S[^\n]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
SUBCOMMAND = re.compile(r"[a-z][a-z0-9-]*")


def split_fences(text: str) -> tuple[list[str], list[str]]:
    """The lines inside fenced code blocks, and the lines outside them."""
    inside, outside, fenced = [], [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            inside.append(line)
        else:
            outside.append(line)
    return inside, outside


def command_path(tokens: list[str]) -> tuple[str, ...]:
    """The subcommand names at the start of `tokens`, walking the CLI's groups;
    a name the CLI does not have ends the walk (its `--help` then fails)."""
    node = typer.main.get_command(app)
    path: list[str] = []
    for tok in tokens:
        # a group has `commands` (typer vendors its own click: no isinstance on click.Group)
        subcommands = getattr(node, "commands", None)
        if subcommands is None or not SUBCOMMAND.fullmatch(tok):
            break
        path.append(tok)
        node = subcommands.get(tok)
    return tuple(path)


def readme_commands() -> list[tuple[str, ...]]:
    code, _ = split_fences(README.read_text())
    found = {command_path(m.group(1).split()) for line in code for m in COMMAND.finditer(line)}
    return sorted(found - {()})


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    _, prose = split_fences(page.read_text())
    seen: dict[str, int] = {}
    out = set()
    for line in prose:
        m = HEADING.match(line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links() -> list[tuple[Path, str]]:
    links = []
    for page in PAGES:
        _, prose = split_fences(page.read_text())
        for line in prose:
            for m in LINK.finditer(CODE_SPAN.sub("", line)):
                target = m.group(1)
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                    links.append((page, target))
    return links


def test_command_path_walks_groups_only() -> None:
    assert command_path(["simulate", "--scenario", "default"]) == ("simulate",)
    assert command_path(["reproduce", "pollux", "--json"]) == ("reproduce", "pollux")
    assert command_path(["trace", "stats", "PATH...", "--format", "itp"]) == ("trace", "stats")
    assert command_path(["scenarios", "#", "built-in"]) == ("scenarios",)
    assert command_path(["no-such-command", "sub"]) == ("no-such-command",)


def test_readme_shows_the_first_commands() -> None:
    names = {path[0] for path in readme_commands()}
    assert {"scenarios", "policies", "simulate", "compare"} <= names, names


@pytest.mark.parametrize("path", readme_commands(), ids=" ".join)
def test_readme_command_parses(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, f"hrlsched {' '.join(path)} --help: exit {result.exit_code}\n{result.output}"


def test_slug_follows_github() -> None:
    assert slug("The RL schedulers of the literature (`dl2`, `harmony`)") == (
        "the-rl-schedulers-of-the-literature-dl2-harmony")
    assert slug("GPU types: per-model speeds") == "gpu-types-per-model-speeds"
    assert slug("Against the Pollux authors' simulator") == "against-the-pollux-authors-simulator"


def test_pages_have_links() -> None:
    assert any(page == README for page, _ in relative_links())


@pytest.mark.parametrize("page,target", relative_links(), ids=lambda v: str(v))
def test_relative_link_resolves(page: Path, target: str) -> None:
    file_part, _, anchor = target.partition("#")
    dest = (page.parent / file_part).resolve() if file_part else page
    where = f"{page.relative_to(ROOT)}: link {target}"
    assert dest.exists(), f"{where}: no file {dest}"
    if anchor and dest.suffix == ".md":
        assert anchor in anchors(dest), f"{where}: no heading with anchor #{anchor} in {dest.name}"


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; at most {MAX_README_LINES}"
