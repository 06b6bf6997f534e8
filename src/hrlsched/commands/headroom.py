"""``hrlsched headroom``: how far the rules and the best heuristic are from
the ``lookahead`` oracle, per scenario and level."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def headroom(
        ctx: typer.Context,
        case: Annotated[list[str], typer.Option(help="a scenario, with overrides after @ and its own lookahead settings after #: default@predictor.work_noise=0.7, itp-c01#every=48 (repeatable)")],
        seeds: Annotated[str, typer.Option(help="seeds: a range 0-2, a list 0,3,5, or both")] = "0-2",
        lookahead: Annotated[str, typer.Option(help="the lookahead's settings but its level, key=value joined by / (e.g. every=4/targets=2); see agent/lookahead.py")] = "",
        policies: Annotated[Optional[str], typer.Option(help="comma-separated heuristics among which the best is found (default: evaluate's; the rules always: optimus-tuned, or optimus-tuned+P with --lookahead place=P)")] = None,  # noqa: UP045
        out: Annotated[Path, typer.Option(help="folder of the runs (reused when the config is the same)")] = Path("runs/headroom"),
        levels: Annotated[str, typer.Option(help="the lookahead's levels, comma-separated among 1, 2, both")] = "1,2",
        workers: Annotated[int, typer.Option(min=1, help="parallel processes")] = 2,
        markdown: Annotated[Optional[Path], typer.Option(help="also write the tables as markdown to this file")] = None,  # noqa: UP045
    ) -> None:
        """Print and write (headroom.json in OUT) the headroom of each case: the
        rules (optimus-tuned; placed by P with --lookahead place=P), the best heuristic, and the lookahead oracle at
        level 1, level 2 and both, with its gains over the rules and over the
        best heuristic paired by seed, its time per episode, and the
        alternatives it took."""
        from hrlsched.commands import invoked_command, names, runs_with_progress, seeds_or_exit
        from hrlsched.experiments.headroom import headroom as run_headroom
        from hrlsched.experiments.headroom import markdown as to_markdown
        from hrlsched.experiments.markdown import write_markdown

        err = Console(stderr=True)
        seed_list = seeds_or_exit(err, seeds)
        rows = runs_with_progress(err, lambda progress: run_headroom(
            case, seed_list, out, lookahead, names(policies), workers, progress,
            tuple(x.strip() for x in levels.split(",") if x.strip())))
        text = to_markdown(rows, lookahead)
        print(text)
        if markdown is not None:
            write_markdown(markdown, text, invoked_command(ctx))
            err.print(f"wrote {out}/headroom.json; {markdown}")
