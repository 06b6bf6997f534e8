"""``hrlsched explain``: where the agent departs from its rules, per choice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def explain(
        policy: Annotated[str, typer.Option(help="hrl (the agent, against its rules) or dl2 (against its teacher DRF)")] = "hrl",
        scenario: Annotated[str, typer.Option(help="built-in scenario name or scenario YAML")] = "default",
        seed: Annotated[int, typer.Option(min=0, help="workload seed (0-99: evaluation seeds; 100-199: held back)")] = 0,
        checkpoint: Annotated[Optional[Path], typer.Option(help="the policy's checkpoint: a file or a shipped one's name (hrlsched checkpoint list; default: the shipped one)")] = None,  # noqa: UP045
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a scenario value: key=value (repeatable)")] = None,  # noqa: UP045
        examples: Annotated[int, typer.Option(min=0, help="departures printed, the first ones")] = 5,
        list_all: Annotated[bool, typer.Option("--list", help="print every departure")] = False,
        play: Annotated[str, typer.Option(help="whose slot is played at each choice: agent, rules or hint")] = "agent",
        reserve: Annotated[Optional[str], typer.Option(help="which running jobs hold their room until their turn: all, none or hint (default: the checkpoint's)")] = None,  # noqa: UP045
        window: Annotated[Optional[int], typer.Option(min=1, help="with --policy dl2: its job slots (default: the checkpoint's, 40)")] = None,  # noqa: UP045
        as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """At each level-1 choice of a greedy run, the agent's slot against the slot of its
        rules (the same checkpoint with its learned scorer silenced) in the same state:
        counts by kind of departure (keep, wait, more or fewer workers, another
        architecture or mode, ...) and the first departures. With --policy dl2: DL2's
        allocations against those of its teacher DRF at each of its decision points,
        the jobs its window leaves out and the GPUs it leaves idle, and the run's
        average JCT (--window: another number of job slots)."""
        from hrlsched.config import ConfigError
        from hrlsched.experiments.explain import explain as run_explain
        from hrlsched.experiments.explain import explain_dl2, format_departures, format_dl2

        err = Console(stderr=True)
        if policy not in ("hrl", "dl2"):
            err.print(f"[red]error:[/red] --policy {policy!r}: expected hrl or dl2")
            raise typer.Exit(2)
        if policy == "dl2" and (play != "agent" or reserve is not None or list_all):
            err.print("[red]error:[/red] --play, --reserve and --list are the agent's (--policy hrl)")
            raise typer.Exit(2)
        if policy == "hrl" and window is not None:
            err.print("[red]error:[/red] --window is DL2's (--policy dl2)")
            raise typer.Exit(2)
        try:
            if policy == "dl2":
                d = explain_dl2(scenario, seed, checkpoint, set_ or [], window)
                print(json.dumps(d, indent=2) if as_json else format_dl2(d))
                return
            d = run_explain(scenario, seed, checkpoint, set_ or [], play, reserve, None if list_all else examples)
        except (ConfigError, ValueError, FileNotFoundError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        print(json.dumps(d, indent=2) if as_json else format_departures(d))
