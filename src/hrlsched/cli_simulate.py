"""The body of ``hrlsched simulate``, apart from the command-line parser, so
that the console script's fast path (``hrlsched.entry``) runs it without
importing typer (and the pydantic adapters typer builds for every option):
users time the whole command. ``hrlsched.cli`` declares the options and the
help and calls ``run_simulate`` too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def summary_table(title: str, rows: list[tuple[str, str]]) -> str:
    """The summary as plain aligned text: rich, which drew it before, was a twentieth of the command's time."""
    w0 = max(len("metric"), *(len(k) for k, _ in rows))
    w1 = max(len("value"), *(len(v) for _, v in rows))
    rule = "-" * (w0 + w1 + 3)
    lines = [title, rule, f"{'metric':<{w0}}   {'value':>{w1}}", rule]
    lines += [f"{k:<{w0}}   {v:>{w1}}" for k, v in rows]
    return "\n".join([*lines, rule])


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
    import gc

    from hrlsched.config import resolve_run_config
    from hrlsched.contract import InvalidDecisionError
    from hrlsched.errors import ConfigError
    from hrlsched.outdir import OutputDirError
    from hrlsched.run import run_to_dir
    from hrlsched.units import format_metric

    if not gc.isenabled():  # hrlsched.entry's fast path: what the imports made, frozen out of every collection
        gc.freeze()
        gc.enable()
    try:
        extra = []
        if checkpoint is not None:  # (a shipped checkpoint's name is its file: hrlsched checkpoint list)
            from hrlsched.agent.common.shipped import checkpoint_path

            extra = [f"checkpoint={checkpoint_path(checkpoint).resolve()}"]
        cfg = resolve_run_config(scenario, policy, seed, [*(sets or []), *extra])
    except ConfigError as e:
        return _fail(str(e))
    # run_to_dir checks --out before it simulates: a wrong one (OutputDirError) fails at once.
    errors = (ConfigError, OutputDirError, InvalidDecisionError, ValueError, KeyError)
    if sys.stderr.isatty():  # a bar to draw: rich is imported only here
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
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
                return _fail(str(e))
    else:  # no bar to draw (a disabled rich Progress prints nothing): rich.progress is not imported
        try:
            summ = run_to_dir(cfg, out, None, plots=plots, force=force)
        except errors as e:
            return _fail(str(e))
    from hrlsched.provenance import record_command

    record_command(out, simulate_command({"scenario": scenario, "out": out, "policy": policy, "seed": seed, "sets": sets,
                                          "plots": plots, "force": force, "checkpoint": checkpoint}))
    print(summary_table(f"{cfg.scenario.name} / {cfg.policy} / seed {cfg.seed}",
                        [(k, format_metric(k, v)) for k, v in summ.items()]))
    files = "config.yaml, jobs.csv, rounds.csv, summary.json, command.txt" + (", jct_cdf.png, timeline.png" if plots else "")
    print(f"wrote {out}/ ({files}; times in seconds in summary.json)", file=sys.stderr)
    return 0
