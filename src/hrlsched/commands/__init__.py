"""Command modules of the ``hrlsched`` CLI, one per topic (calibrate, trace,
compare, ...). Each defines ``register(app)``; ``hrlsched.cli`` registers them
all, so adding a command never touches another topic's module."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import TypeVar

import typer
from rich.console import Console

T = TypeVar("T")


def register_all(app: typer.Typer) -> None:
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{mod}").register(app)


def invoked_command(ctx: typer.Context) -> str:
    """The running command (``ctx``: its context) as a shell line, with the
    options given (not the defaults): what ``--markdown`` files record as
    their source."""
    import shlex

    words = ["hrlsched", *ctx.command_path.split()[1:]]
    for p in ctx.command.params:
        if getattr(p, "param_type_name", "") != "option" or p.name is None:
            continue
        source = ctx.get_parameter_source(p.name)
        if source is None or source.name == "DEFAULT":
            continue
        v = ctx.params[p.name]
        if getattr(p, "is_flag", False):
            if p.secondary_opts:
                words.append(p.opts[0] if v else p.secondary_opts[0])
            elif v:
                words.append(p.opts[0])
            continue
        for x in (v if p.multiple else [v]):
            words += [p.opts[0], str(x)]
    return shlex.join(words)


def runs_with_progress(err: Console, work: Callable[[Callable[[int, int], None]], T]) -> T:
    """``work(progress)`` under a bar of the runs done (on ``err``, where it is
    a terminal). Ctrl-C exits 130 with one line (the runs done are kept); a
    bad config or input exits 2 with its message."""
    import sys

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hrlsched.config import ConfigError
    from hrlsched.experiments.compare import CompareInterrupted

    with Progress(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("runs", total=None)
        try:
            return work(lambda d, n: bar.update(task, completed=d, total=n))
        except CompareInterrupted as e:
            bar.stop()
            print(str(e), file=sys.stderr)  # one plain line, never wrapped
            raise typer.Exit(130) from None
        except (ConfigError, ValueError, FileNotFoundError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None


def seeds_or_exit(err: Console, text: str) -> list[int]:
    """``--seeds`` parsed (``hrlsched.seeds.parse_seeds``); a bad one exits 2 with its message."""
    from hrlsched.seeds import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None


def names(text: str | None) -> list[str] | None:
    """A comma-separated list of names (``--policies``); None stays None."""
    return None if text is None else [p.strip() for p in text.split(",") if p.strip()]
