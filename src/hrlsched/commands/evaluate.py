"""``hrlsched evaluate``: the agent against its ablations, the heuristics
(and the RL rivals) and the lower bound, paired by seed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def evaluate(
        ctx: typer.Context,
        scenario: Annotated[str, typer.Option(help="built-in scenario name (e.g. default, comm, large) or scenario YAML")] = "default",
        seeds: Annotated[str, typer.Option(help="evaluation seeds: a range 0-19, a list 0,3,5, or both (0-4,10)")] = "0-4",
        checkpoint: Annotated[Optional[Path], typer.Option(help="the agent's checkpoint: a file or a shipped one's name, e.g. hrl-hetero (hrlsched checkpoint list; default: hrl-default)")] = None,  # noqa: UP045
        ablate: Annotated[bool, typer.Option(help="the rules-only and hint-alone rows, built from the checkpoint")] = True,
        rivals: Annotated[bool, typer.Option("--rivals", help="add DL2 and Harmony, and each against its paper's baselines")] = False,
        policies: Annotated[Optional[str], typer.Option(help="comma-separated heuristics (default: every one of hrlsched policies but the learned and the lookahead: the agent's rules and their variants, optimus+pack, optimus+topology, ..., the literature's schedulers, pollux and gavel included)")] = None,  # noqa: UP045
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a scenario value: key=value (repeatable)")] = None,  # noqa: UP045
        out: Annotated[Optional[Path], typer.Option(help="folder of the runs and tables (default: runs/evaluate-SCENARIO)")] = None,  # noqa: UP045
        workers: Annotated[int, typer.Option(min=1, help="parallel processes")] = 2,
        markdown: Annotated[Optional[Path], typer.Option(help="also write the table as markdown to this file")] = None,  # noqa: UP045
        dl2: Annotated[Optional[Path], typer.Option(help="DL2's checkpoint with --rivals (default: the shipped one)")] = None,  # noqa: UP045
        harmony: Annotated[Optional[Path], typer.Option(help="Harmony's checkpoint with --rivals (default: the shipped one)")] = None,  # noqa: UP045
        lookahead: Annotated[Optional[str], typer.Option(help="add the lookahead oracle with these settings (key=value joined by /, e.g. every=24; 'default' for its defaults); minutes per episode")] = None,  # noqa: UP045
        placements: Annotated[bool, typer.Option("--placements", help="level 2 alone: the agent's rules placed by pack, balance, topology and by its learned placement choice, and the best of the three without interference (target 'level 2')")] = False,
        versus: Annotated[Optional[list[Path]], typer.Option("--versus", help="another checkpoint of the agent as a row (vs-NAME), paired by seed (repeatable)")] = None,  # noqa: UP045
    ) -> None:
        """Print and write (evaluation.csv, evaluation.json in OUT) one table: the agent,
        its rules-only ablation and its hint alone, every heuristic (the best of the
        scenario and the oracles marked), with --rivals DL2 and Harmony, and the lower
        bound: mean average JCT ± 95% interval, the paired difference to the agent and
        the seeds where the agent is faster. Then how often the agent departs from its
        rules on the first seed. Runs already in OUT with the same config are reused."""
        from hrlsched.commands import invoked_command, runs_with_progress, seeds_or_exit
        from hrlsched.commands import names as name_list
        from hrlsched.experiments.evaluate import evaluate as run_evaluate
        from hrlsched.experiments.evaluate import every_heuristic, format_table
        from hrlsched.experiments.evaluate import markdown as to_markdown
        from hrlsched.experiments.markdown import write_markdown
        from hrlsched.provenance import record_command

        err = Console(stderr=True)
        seed_list = seeds_or_exit(err, seeds)
        names = every_heuristic() if policies is None else name_list(policies)
        if not rivals and (dl2 is not None or harmony is not None):
            err.print("[red]error:[/red] --dl2/--harmony: a rival's checkpoint is used with --rivals only")
            raise typer.Exit(2)
        folder = out if out is not None else Path("runs") / f"evaluate-{Path(scenario).stem}"
        rival_cks = {k: v for k, v in (("dl2", dl2), ("harmony", harmony)) if v is not None}
        ev = runs_with_progress(err, lambda progress: run_evaluate(
            scenario, seed_list, folder, checkpoint, names, rivals, ablate, set_ or [], workers, progress, rival_cks,
            None if lookahead is None else ("" if lookahead == "default" else lookahead), placements,
            list(versus or [])))
        record_command(folder, invoked_command(ctx))
        print(format_table(ev))
        wrote = f"{folder}/evaluation.csv, evaluation.json, command.txt and runs/"
        if markdown is not None:
            write_markdown(markdown, to_markdown(ev), invoked_command(ctx))
            wrote += f"; {markdown}"
        err.print(f"wrote {wrote}")
