"""``hrlsched validate-perf``: every fidelity figure of the performance models."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

TARGETS = {
    "dl2_mape_pct.max": "<= 10",
    "deepshare_sharing_median_abs_err": "< deepshare_measured_median_slowdown",
    "heldout_step_mape_pct.bert.single_node": "<= 15",
    "heldout_step_mape_pct.bert.multi_node": "<= 15",
    "heldout_step_mape_pct.yolov3.single_node": "<= 15",
    "heldout_step_mape_pct.yolov3.multi_node": "<= 15",
    "compute_interference_loo_mape_pct.all": "< compute_interference_none_mape_pct.all",
}


def _measured_figures() -> Callable[[Path], dict[str, float]] | None:
    """The measured backend's own figures, where that module provides them."""
    import importlib

    return getattr(importlib.import_module("hrlsched.perf.measured"), "measured_figures", None)


def collect(data_dir: Path) -> tuple[dict[str, float], dict[str, str]]:
    """(figures, {check: why it was skipped}) for every check whose data is in ``data_dir``."""
    from hrlsched.calibration.colocation import colocation_figures
    from hrlsched.calibration.dl2_fit import dl2_figures
    from hrlsched.calibration.heldout import TEST, TRAIN, heldout_figures
    from hrlsched.calibration.interference import deepshare_figures, gavel_figures

    pollux = [f"pollux/traces/{m}/placements.csv" for m in TRAIN + TEST]
    checks: list[tuple[str, list[str], Callable[[Path], dict[str, float]] | None]] = [
        ("DL2 Optimus calibration", ["dl2/config_speed.txt"], dl2_figures),
        ("Measured backend (Pollux replay)", ["pollux/traces"], _measured_figures()),
        ("DeepShare network sharing", ["deepshare/shared_thp_ratio.csv"], deepshare_figures),
        ("Gavel consolidated vs spread", ["gavel/simulation_throughputs.json"], gavel_figures),
        ("Pollux held-out all-reduce", pollux, heldout_figures),
        ("Compute interference of co-located workers", pollux, colocation_figures),
    ]
    figs: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for what, needs, fn in checks:
        if fn is None:
            skipped[what] = "hrlsched.perf.measured provides no measured_figures"
            continue
        absent = [n for n in needs if not (data_dir / n).exists()]
        if absent:
            skipped[what] = f"{data_dir / absent[0]} is absent (see ../shared/data/SOURCES.md)"
            continue
        figs.update(fn(data_dir))
    return figs, skipped


def register(app: typer.Typer) -> None:
    @app.command("validate-perf")
    def validate_perf(
        data_dir: Annotated[Optional[Path], typer.Option(help="data folder (default: $HRLSCHED_DATA or ../shared/data)")] = None,  # noqa: UP045
        json_out: Annotated[bool, typer.Option("--json", help="one JSON object of named figures")] = False,
    ) -> None:
        """Print every fidelity figure of the performance models against public measurements."""
        from hrlsched.workload.trace import data_dir as default_dir

        if data_dir is not None and not data_dir.is_dir():
            typer.echo(f"error: --data-dir {data_dir}: no such directory; expected the public data folder "
                       "(see ../shared/data/SOURCES.md)", err=True)
            raise typer.Exit(2)
        figs, skipped = collect(data_dir or default_dir())
        if json_out:
            print(json.dumps({"figures": figs, "skipped": skipped}, indent=2, sort_keys=True))
            return
        table = Table(title="performance-model fidelity")
        for c in ("figure", "value", "target"):
            table.add_column(c)
        for k, v in figs.items():
            table.add_row(k, f"{v:g}", TARGETS.get(k, ""))
        Console(width=120).print(table)
        for what, why in skipped.items():
            Console(stderr=True).print(f"skipped {what}: {why}")
