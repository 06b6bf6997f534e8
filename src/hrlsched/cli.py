"""The ``hrlsched`` command line. Commands are thin: they parse, call the
library, and print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from hrlsched.config import RunConfig


# hrlsched.config (the settings, and numpy through the cluster spec) is imported on first
# use, so that `--help` and the commands that read no config do not pay for it.
def resolve_run_config(*args: Any, **kwargs: Any) -> RunConfig:
    from hrlsched.config import resolve_run_config as resolve

    return resolve(*args, **kwargs)


def builtin_scenarios() -> dict[str, Path]:
    from hrlsched.config import builtin_scenarios as scenarios

    return scenarios()


def load_yaml(path: Path) -> dict[str, Any]:
    from hrlsched.config import load_yaml as load

    return load(path)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Hierarchical-RL cluster scheduling: simulate, compare, calibrate.")


@app.command()
def simulate(
    scenario: Annotated[str, typer.Option(help="built-in scenario name, scenario YAML, or a run's config.yaml")],
    out: Annotated[Path, typer.Option(help="run directory to write")],
    policy: Annotated[Optional[str], typer.Option(help="ALLOCATION[+PLACEMENT], e.g. fifo+pack")] = None,  # noqa: UP045
    seed: Annotated[Optional[int], typer.Option(help="seed of the workload and the policy")] = None,  # noqa: UP045
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a config value: key=value")] = None,  # noqa: UP045
    plots: Annotated[bool, typer.Option(help="write PNG plots")] = True,
    force: Annotated[bool, typer.Option(help="replace an earlier run's files in --out")] = False,
    checkpoint: Annotated[Optional[Path], typer.Option(help="checkpoint of a learned policy (hrl, dl2, harmony): a file or a shipped one's name (hrlsched checkpoint list); default: the shipped one")] = None,  # noqa: UP045
) -> None:
    """Simulate one scenario under one policy and write the run directory."""
    # The body is shared with the console script's fast path (hrlsched.entry).
    from hrlsched.cli_simulate import run_simulate

    code = run_simulate(scenario, out, policy, seed, set_, plots, force, checkpoint)
    if code:
        raise typer.Exit(code)


@app.command()
def scenarios(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the built-in scenarios."""
    from hrlsched.data import WHERE, data_dir

    rows = []
    for name, path in sorted(builtin_scenarios().items()):
        d = load_yaml(path)
        needs = list(d.get("needs_data", []))
        missing = [n for n in needs if not (data_dir() / n).exists()]
        rows.append({"name": name, "description": " ".join(str(d.get("description", "")).split()),
                     "needs_data": needs, "data_present": not missing, "data_dir": str(data_dir())})
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    present = "present" if data_dir().is_dir() else "absent"
    table = Table(caption=f"data folder: {data_dir()} ({present}). For a scenario whose data is MISSING: {WHERE}")
    table.add_column("scenario")
    table.add_column("data")
    table.add_column("description")
    for r in rows:
        data = "-" if not r["needs_data"] else ("present" if r["data_present"] else "MISSING")
        table.add_row(r["name"], data, r["description"])
    Console(width=140).print(table)


@app.command()
def policies() -> None:
    """List every policy, with one line and its paper."""
    from hrlsched.policies.registry import all_policies

    table = Table()
    for c in ("name", "kind", "what it does", "paper"):
        table.add_column(c)
    for p in all_policies():
        table.add_row(p.name, p.kind, p.summary, p.paper)
    Console(width=160).print(table)


def _register_commands() -> None:
    from hrlsched.commands import register_all

    register_all(app)


_register_commands()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
