"""``hrlsched reproduce``: published tables, rerun on our simulator."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

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

    @rep.command("pollux-sim")
    def pollux_sim(
        policy: Annotated[str, typer.Option(help="the Pollux simulator's policy (ours: tiresias -> tiresias-pollux)")] = "tiresias",
        workload: Annotated[int, typer.Option(min=1, max=8, help="Pollux workload number (1..8)")] = 6,
        pollux_dir: Annotated[Optional[Path], typer.Option(help="the Pollux simulator's folder (adaptdl/simulator; env POLLUX_SIM_DIR)")] = None,  # noqa: UP045
        pollux_python: Annotated[Optional[Path], typer.Option(help="its interpreter (env POLLUX_PYTHON; default: .venv or venv beside it)")] = None,  # noqa: UP045
        repeats: Annotated[int, typer.Option(min=1, help="our runs after the cold one (median)")] = 5,
        pollux_repeats: Annotated[int, typer.Option(min=1, help="runs of the Pollux simulator (median)")] = 3,
    ) -> None:
        """Our simulator against the Pollux authors' simulator (petuum/adaptdl, branch
        osdi21-artifact) on one workload and policy, both timed as whole processes (what a
        user waits for); targets: our wall time at least 20x lower, our average JCT within
        15% of theirs. Get theirs once, beside the project: git clone --branch
        osdi21-artifact --depth 1 https://github.com/petuum/adaptdl ../adaptdl; python3.8
        -m venv ../adaptdl/.venv; ../adaptdl/.venv/bin/pip install numpy==1.19.5
        pandas==1.1.5 scipy==1.5.4 autograd pymoo==0.4.2.2. Without it, our JCT is compared
        with the authors' published result."""
        from hrlsched.experiments.pollux_sim import against_pollux

        err = Console(stderr=True)
        sim_dir = pollux_dir or (Path(os.environ["POLLUX_SIM_DIR"]) if os.environ.get("POLLUX_SIM_DIR") else None)
        python = pollux_python or (Path(os.environ["POLLUX_PYTHON"]) if os.environ.get("POLLUX_PYTHON") else None)
        try:
            lines = against_pollux(policy, workload, sim_dir, python, repeats, pollux_repeats)
        except (FileNotFoundError, RuntimeError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        print("\n".join(lines))
