"""``hrlsched reproduce``: published tables, rerun on our simulator."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    rep = typer.Typer(no_args_is_help=True, help="Reproduce a published table on our simulator.")
    app.add_typer(rep, name="reproduce")

    @rep.command("pollux")
    def pollux(
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (with per-workload figures)")] = False,
        workers: Annotated[int, typer.Option(min=1, help="parallel processes")] = 2,
        workloads: Annotated[str, typer.Option(help="comma-separated workload numbers (1..8)")] = "1,2,3,4,5,6,7,8",
    ) -> None:
        """Pollux (OSDI'21) Table 2: mean over the 8 workloads of the average JCT of
        Tiresias+TunedJobs, Optimus+Oracle+TunedJobs and Pollux, ours beside the published."""
        from hrlsched.experiments.reproduce import format_table, reproduce_pollux

        err = Console(stderr=True)
        try:
            ws = tuple(int(x) for x in workloads.split(",") if x.strip())
            if not ws or any(not 1 <= w <= 8 for w in ws):
                raise ValueError
        except ValueError:
            err.print(f"[red]error:[/red] --workloads: expected numbers 1..8 separated by commas, got {workloads!r}")
            raise typer.Exit(2) from None
        show = sys.stderr.isatty()
        try:
            res = reproduce_pollux(workers, ws, progress=(lambda d, n: err.print(f"{d}/{n} runs")) if show else None)
        except (FileNotFoundError, ValueError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        print(json.dumps(res, indent=2) if as_json else format_table(res))
