"""``hrlsched calibrate``: fit the Optimus speed function to measurements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table


def register(app: typer.Typer) -> None:
    @app.command()
    def calibrate(
        path: Annotated[Path, typer.Argument(help="measurement file")],
        format: Annotated[str, typer.Option("--format", help="measurement format: dl2")] = "dl2",
        out: Annotated[Optional[Path], typer.Option(help="write the fitted parameters (YAML)")] = None,  # noqa: UP045
        json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    ) -> None:
        """Fit the Optimus speed function per model and print the speed MAPE of each."""
        from hrlsched.calibration.dl2_fit import calibrate_dl2
        from hrlsched.io import write_yaml

        if format != "dl2":
            Console(stderr=True).print(f"[red]error:[/red] --format {format!r}: expected 'dl2'")
            raise typer.Exit(2)
        try:
            res = calibrate_dl2(path)
        except (OSError, ValueError) as e:
            Console(stderr=True).print(f"[red]error:[/red] {e}", highlight=False)
            raise typer.Exit(2) from None
        params = {
            m: {"theta": [float(f"{x:.6g}") for x in f.theta], "mape_pct": round(f.mape, 2), "points": f.n_points,
                "ps_cores_measured": round(f.ps_cores, 3), "worker_cores_measured": round(f.worker_cores, 3)}
            for m, f in res.fits.items()
        }
        doc = {"source": str(path), "format": format, "failed_runs_dropped": res.dropped,
               "form": "t(w,p) = theta0*M/w + theta1 + theta2*w/p + theta3*w + theta4*p", "models": params}
        if out:
            write_yaml(out, doc)
        if json_out:
            print(json.dumps(doc, indent=2))
            return
        table = Table(title=f"Optimus fit on {path} ({res.dropped} failed runs dropped)")
        for c in ("model", "points", "MAPE %", "theta0", "theta1", "theta2", "theta3", "theta4"):
            table.add_column(c, justify="right" if c != "model" else "left")
        for m, f in res.fits.items():
            table.add_row(m, str(f.n_points), f"{f.mape:.2f}", *(f"{x:.4g}" for x in f.theta))
        Console(width=120).print(table)
        if out:
            Console(stderr=True).print(f"wrote {out}")
