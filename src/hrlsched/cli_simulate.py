"""The body of ``hrlsched simulate``, apart from the command-line parser, so
that the console script's fast path (``hrlsched.entry``) runs it without
importing typer (and the pydantic adapters typer builds for every option):
users time the whole command. ``hrlsched.cli`` declares the options and the
help and calls ``run_simulate`` too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def _fail(console: Console, msg: str) -> int:
    console.print(f"[red]error:[/red] {msg}", highlight=False)
    return 2


def simulate_command(opts: dict[str, Any]) -> str:
    """``run_simulate``'s arguments, by keyword, as the shell line that runs
    it (the options given, not the defaults), for ``command.txt``."""
    import shlex

    words = ["hrlsched", "simulate"]
    for key in ("scenario", "out", "policy", "seed", "checkpoint"):
        if opts.get(key) is not None:
            words += [f"--{key}", str(opts[key])]
    for s in opts.get("sets") or []:
        words += ["--set", s]
    words += [*([] if opts.get("plots", True) else ["--no-plots"]), *(["--force"] if opts.get("force") else [])]
    return shlex.join(words)


def run_simulate(
    scenario: str,
    out: Path,
    policy: str | None = None,
    seed: int | None = None,
    sets: list[str] | None = None,
    plots: bool = True,
    force: bool = False,
    checkpoint: Path | None = None,
) -> int:
    """Simulate one scenario under one policy, write the run directory and
    print the summary table; the exit code (2: a user error, printed)."""
    from rich.console import Console

    from hrlsched.config import resolve_run_config
    from hrlsched.contract import InvalidDecisionError
    from hrlsched.errors import ConfigError
    from hrlsched.outdir import OutputDirError
    from hrlsched.run import run_to_dir
    from hrlsched.units import format_metric

    console = Console(stderr=True)
    try:
        extra = [f"checkpoint={checkpoint.resolve()}"] if checkpoint is not None else []
        cfg = resolve_run_config(scenario, policy, seed, [*(sets or []), *extra])
    except ConfigError as e:
        return _fail(console, str(e))
    # run_to_dir checks --out before it simulates: a wrong one (OutputDirError) fails at once.
    errors = (ConfigError, OutputDirError, InvalidDecisionError, ValueError, KeyError)
    if sys.stderr.isatty():
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[jobs]}"),
            TimeElapsedColumn(), console=console, transient=True,
        ) as bar:
            task = bar.add_task(f"{cfg.scenario.name} / {cfg.policy}", total=None, jobs="")

            def tick(t: float, done: int, total: int) -> None:
                bar.update(task, total=total, completed=done, jobs=f"{done}/{total} jobs, t={t / 3600:.1f} h")

            try:
                summ = run_to_dir(cfg, out, tick, plots=plots, force=force)
            except errors as e:
                return _fail(console, str(e))
    else:  # no bar to draw (a disabled rich Progress prints nothing): rich.progress is not imported
        try:
            summ = run_to_dir(cfg, out, None, plots=plots, force=force)
        except errors as e:
            return _fail(console, str(e))
    from hrlsched.provenance import record_command

    record_command(out, simulate_command({"scenario": scenario, "out": out, "policy": policy, "seed": seed, "sets": sets,
                                          "plots": plots, "force": force, "checkpoint": checkpoint}))
    from rich.table import Table

    table = Table(title=f"{cfg.scenario.name} / {cfg.policy} / seed {cfg.seed}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in summ.items():
        table.add_row(k, format_metric(k, v))
    Console().print(table)
    files = "config.yaml, jobs.csv, rounds.csv, summary.json, command.txt" + (", jct_cdf.png, timeline.png" if plots else "")
    console.print(f"wrote {out}/ ({files}; times in seconds in summary.json)")
    return 0
