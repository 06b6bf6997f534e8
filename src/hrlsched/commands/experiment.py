"""``hrlsched experiment NAME``: one of the design's studies
(``experiments.studies``), resumable, with a progress bar and its time left."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def _hms(s: float) -> str:
    s = max(int(round(s)), 0)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Runs done and time left, on stderr: a bar on a terminal, else a line
    at most every ``every_s`` seconds (and the last). The time left weighs
    each run by its cost (``experiment.COST``), at the pace of the runs done
    since this start (before any: the cost table's)."""

    def __init__(self, err: Console, workers: int, every_s: float = 10.0) -> None:
        self.err, self.workers, self.every_s = err, max(workers, 1), every_s
        self.t0 = time.monotonic()
        self.first: float | None = None  # cost already done at the start (kept runs)
        self.last_line = -1e9
        self.bar = None
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           TextColumn("{task.fields[left]}"), console=err)
            self.task = self.bar.add_task("runs", total=None, left="")

    def left_s(self, done_cost: float, total_cost: float) -> float:
        if self.first is None:
            self.first = done_cost
        now = time.monotonic() - self.t0
        ran = done_cost - self.first
        pace = now / ran if ran > 0 else 1.0 / self.workers
        return (total_cost - done_cost) * pace

    def __call__(self, done_cost: float, total_cost: float, done: int, total: int) -> None:
        left = self.left_s(done_cost, total_cost)
        text = f"about {_hms(left)} left" if done < total else "done"
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, left=text)
            return
        now = time.monotonic()
        if done == total or now - self.last_line >= self.every_s:
            self.last_line = now
            print(f"runs {done}/{total}, {_hms(now - self.t0)} elapsed, {text}", file=sys.stderr, flush=True)

    def __enter__(self) -> Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def register(app: typer.Typer) -> None:
    @app.command()
    def experiment(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="main, load, interference, prediction-error, sync-async, arrivals, "
                                                 "scale or overhead")],
        quick: Annotated[bool, typer.Option("--quick", help="the small size: under 10 minutes on 2 cores")] = False,
        out: Annotated[Optional[Path], typer.Option(help="output folder (default: runs/experiment-NAME[-quick])")] = None,  # noqa: UP045
        backend: Annotated[str, typer.Option(help="where the runs go: local or ray (a Ray cluster: "
                                                  "RAY_ADDRESS, else a local one)")] = "local",
        workers: Annotated[int, typer.Option(min=1, help="parallel processes (local; Ray: CPUs of a local cluster)")] = 2,
        seeds: Annotated[Optional[str], typer.Option(help="evaluation seeds instead of the size's (0-99; quick: a few), "  # noqa: UP045
                                                          "e.g. 0-4")] = None,
        plan_only: Annotated[bool, typer.Option("--plan", help="print the runs and the time estimate, run nothing")] = False,
        docs: Annotated[Optional[Path], typer.Option(help="also write the page DOCS/NAME.md (its tables and the "  # noqa: UP045
                                                         "command, below the reading it keeps) and copy the plots there")] = None,
    ) -> None:
        """Run one of the design's studies: sweep its factor, run every policy it names on
        every setting, paired by seed; write results.csv (one row per policy x setting x
        seed), summary.md, experiment.json and its plots (PNG) to OUT, and print the tables.
        Runs already done in OUT with the same config are kept (Ctrl-C or kill -9, then the
        same command again resumes). The time estimate is printed first."""
        from hrlsched.commands import invoked_command
        from hrlsched.config import ConfigError
        from hrlsched.experiments.compare import CompareInterrupted
        from hrlsched.experiments.experiment import BACKENDS, estimate_s, kept, plan, run_experiment
        from hrlsched.experiments.studies import EXPERIMENTS
        from hrlsched.seeds import parse_seeds, seeds_text

        err = Console(stderr=True)

        def fail(msg: str) -> None:
            err.print(f"[red]error:[/red] {msg}")
            raise typer.Exit(2)

        if name not in EXPERIMENTS:
            fail(f"experiment {name!r}: expected one of {', '.join(EXPERIMENTS)}")
        if backend not in BACKENDS:
            fail(f"--backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
        exp = EXPERIMENTS[name]
        folder = out if out is not None else Path("runs") / f"experiment-{name}{'-quick' if quick else ''}"
        try:
            seed_list = parse_seeds(seeds) if seeds is not None else exp.seed_list(quick)
            tasks = plan(exp, folder, quick, seed_list)
        except (ConfigError, ValueError) as e:
            fail(str(e))
        todo = [t for t in tasks if kept(t) is None]
        size = "quick" if quick else "full"
        err.print(f"experiment {name} ({size}): {exp.title}; {len(exp.settings(quick))} settings x "
                  f"{len(exp.policy_list(quick))} policies x seeds {seeds_text(seed_list)} = {len(tasks)} runs, "
                  f"{len(tasks) - len(todo)} kept in {folder}; estimated {_hms(estimate_s(todo, workers))} "
                  f"on {workers} workers")
        if plan_only:
            return
        words = invoked_command(ctx).split(" ", 2)
        command = " ".join([*words[:2], name, *words[2:]])
        try:
            with Progress(err, workers) as bar:
                run_experiment(exp, folder, quick, workers, backend, seed_list, bar, command)
        except CompareInterrupted as e:
            print(str(e), file=sys.stderr)  # one plain line, never wrapped
            raise typer.Exit(130) from None
        except (ConfigError, ValueError, FileNotFoundError) as e:
            fail(str(e))
        print((folder / "summary.md").read_text())
        wrote = f"{folder}/results.csv, summary.md, experiment.json, the plots and runs/"
        if docs is not None:
            from hrlsched.experiments.experiment import write_docs

            wrote += f"; {write_docs(folder, docs, name)} and its plots"
        err.print(f"wrote {wrote}")
