"""``hrlsched results``: docs/results.md and the README's results tables,
generated from experiment and evaluation outputs (``experiments.results``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def results(
        ctx: typer.Context,
        experiment: Annotated[Optional[Path], typer.Option(help="output folder of `hrlsched experiment main`: "  # noqa: UP045
                                                                "writes --page from its results.csv")] = None,
        evaluations: Annotated[Optional[Path], typer.Option(help="folder holding the evaluate-<case> folders of "  # noqa: UP045
                                                                 "`hrlsched evaluate`: rewrites --readme's tables")] = None,
        page: Annotated[Path, typer.Option(help="the results page to write")] = Path("docs/results.md"),
        readme: Annotated[Path, typer.Option(help="the README whose results tables to rewrite")] = Path("README.md"),
    ) -> None:
        """Write the results pages from experiment outputs, never by hand. With --experiment:
        PAGE's block (between its results:begin and results:end lines) gets every policy on
        the five workloads of `experiment main` (avg, p95, p99 JCT, makespan, GPU utilisation,
        restarts, max finish-time fairness; mean ± 95% interval over the seeds; oracles marked;
        the lower bound; the best of each column in bold). With --evaluations: the tables in
        README's block get the agent, its rules, its hint and the best other heuristic per
        scenario, from each evaluate-<case> folder's evaluation.csv (a row without its folder
        is kept as an earlier run wrote it, and named). Each block's first line
        names this command; everything outside the blocks, and the README's prose between
        its tables, is kept."""
        from rich.markup import escape

        from hrlsched.commands import invoked_command
        from hrlsched.experiments.results import (
            ResultsError,
            write_readme_tables,
            write_results_page,
        )

        err = Console(stderr=True)
        if experiment is None and evaluations is None:
            err.print("[red]error:[/red] expected --experiment DIR (writes the results page), --evaluations DIR "
                      "(rewrites the README's tables), or both")
            raise typer.Exit(2)
        command = invoked_command(ctx)
        try:
            if experiment is not None:
                err.print(f"wrote {write_results_page(page, experiment, command)}", highlight=False, soft_wrap=True)
            if evaluations is not None:
                path, kept = write_readme_tables(readme, evaluations, command)
                err.print(f"wrote {path}" + (f"; rows kept as they were (no finished evaluate-<case> folder under {evaluations}): "
                                             f"{', '.join(kept)}" if kept else ""), highlight=False, soft_wrap=True)
        except (ResultsError, OSError) as e:
            err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
