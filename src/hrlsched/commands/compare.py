"""``hrlsched compare``: policies x seeds on one scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        ctx: typer.Context,
        scenario: Annotated[str, typer.Option(help="built-in scenario name or scenario YAML")],
        policies: Annotated[str, typer.Option(help="comma-separated ALLOCATION[+PLACEMENT] names")],
        out: Annotated[Path, typer.Option(help="output folder")],
        seeds: Annotated[int, typer.Option(min=1, help="seeds per policy (0..K-1)")] = 3,
        workers: Annotated[int, typer.Option(min=1, help="parallel processes")] = 2,
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a config value: key=value")] = None,  # noqa: UP045
        checkpoint: Annotated[Optional[Path], typer.Option(help="agent checkpoint for policy hrl: a file or a shipped one's name, e.g. hrl-hetero (default: hrl-default)")] = None,  # noqa: UP045
        markdown: Annotated[Optional[Path], typer.Option(help="also write the summary table as markdown to this file, with this command line")] = None,  # noqa: UP045
    ) -> None:
        """Run every policy with every seed (in parallel) and write comparison.csv/.md and plots.
        Runs already done in OUT with the same config are kept (an interrupted
        comparison resumes by running the same command again)."""
        from hrlsched.commands import invoked_command, runs_with_progress
        from hrlsched.experiments.compare import compare as run_compare
        from hrlsched.policies.registry import make_scheduler
        from hrlsched.provenance import record_command

        err = Console(stderr=True)
        names = [p.strip() for p in policies.split(",") if p.strip()]
        if not names:
            err.print("[red]error:[/red] --policies: expected at least one policy name, e.g. fifo,optimus+pack")
            raise typer.Exit(2)
        dup = sorted({p for p in names if names.count(p) > 1})
        if dup:
            err.print(f"[red]error:[/red] --policies: {', '.join(dup)} named more than once")
            raise typer.Exit(2)
        if checkpoint is not None and "hrl" not in names:
            err.print("[red]error:[/red] --checkpoint: only policy hrl takes a checkpoint; add hrl to --policies")
            raise typer.Exit(2)
        try:
            for p in names:
                make_scheduler(p, checkpoint=str(checkpoint) if p == "hrl" and checkpoint is not None else None)
        except ValueError as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        runs_with_progress(err, lambda progress: run_compare(
            scenario, names, seeds, out, workers, set_ or [], progress,
            checkpoint=str(checkpoint) if checkpoint is not None else None))
        record_command(out, invoked_command(ctx))
        table = (out / "comparison.md").read_text()
        print(table)
        wrote = f"{out}/comparison.csv, comparison.md, jct_cdf.png, utilisation.png, command.txt and runs/"
        if markdown is not None:
            from hrlsched.experiments.markdown import write_markdown

            write_markdown(markdown, table, invoked_command(ctx))
            wrote += f"; {markdown}"
        err.print(f"wrote {wrote}")
