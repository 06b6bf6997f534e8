"""``hrlsched report``: one self-contained HTML page of an output folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        folder: Annotated[Path, typer.Argument(metavar="DIR", help="a run, comparison, evaluation or experiment directory")],
        out: Annotated[Optional[Path], typer.Option(help="the page to write (default: DIR/report.html)")] = None,  # noqa: UP045
    ) -> None:
        """Render DIR (the output of simulate, compare, evaluate or experiment) into one
        self-contained HTML page: its tables, its plots embedded, its config, the command
        that made it, its seeds and the hrlsched version. The page makes no external request."""
        from hrlsched.report.files import ReportError
        from hrlsched.report.render import write_report

        err = Console(stderr=True)
        try:
            path = write_report(folder, out)
        except (ReportError, OSError) as e:
            err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        err.print(f"wrote {path}", highlight=False, soft_wrap=True)
