"""``hrlsched train``: train the hierarchical agent (behaviour cloning, then
PPO; ``hrlsched.agent.train``), or its rivals DL2 and Harmony
(``hrlsched.rivals``), with checkpoints and ``--resume``."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    register_train(app)
    register_curve(app)


def register_train(app: typer.Typer) -> None:
    @app.command()
    def train(
        scenario: Annotated[str, typer.Option(help="built-in scenario name or scenario YAML")] = "default",
        out: Annotated[Path, typer.Option(help="run directory: config.yaml, metrics.csv, bc.csv, last.pt, best.pt")] = Path("runs/train"),
        minutes: Annotated[Optional[float], typer.Option(help="wall-time budget (summed over resumed runs)")] = None,  # noqa: UP045
        steps: Annotated[Optional[int], typer.Option(help="budget in environment steps")] = None,  # noqa: UP045
        level: Annotated[str, typer.Option(help="1 (allocation; pack places), 2 (placement; optimus allocates), both, or flat (one level: Flat-v0, docs/hierarchy.md)")] = "1",
        init: Annotated[Optional[Path], typer.Option(help="start from this checkpoint's weights")] = None,  # noqa: UP045
        backend: Annotated[str, typer.Option(help="where rollouts run: local (process pool) or ray")] = "local",
        workers: Annotated[int, typer.Option(min=0, help="rollout processes (0: in this process)")] = 2,
        seeds: Annotated[Optional[str], typer.Option(help="training workload seeds, e.g. 1000-1063 (never 0-99)")] = None,  # noqa: UP045
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="scenario override: key=value")] = None,  # noqa: UP045
        option: Annotated[Optional[list[str]], typer.Option("--option", help="training setting: name=value (see config.yaml)")] = None,  # noqa: UP045
        resume: Annotated[bool, typer.Option(help="continue from OUT/last.pt with OUT/config.yaml")] = False,
        seed: Annotated[int, typer.Option(min=0, help="training seed (sampling, shuffling)")] = 0,
        agent: Annotated[str, typer.Option(help="hrl (this project's agent), dl2 or harmony")] = "hrl",
    ) -> None:
        """Train the agent; writes checkpoints every few minutes and keeps the
        best one on held-back seeds (100-104)."""
        from hrlsched.agent.common.training_run import run_config, write_config
        from hrlsched.agent.train import TrainConfig, Trainer
        from hrlsched.errors import CheckpointError
        from hrlsched.seeds import parse_seeds

        err = Console(stderr=True, soft_wrap=True)  # log lines are never wrapped (paths stay whole)
        if backend not in ("local", "ray"):
            err.print(f"[red]error:[/red] --backend: expected local or ray, got {backend!r}")
            raise typer.Exit(2)
        if agent not in AGENTS:
            err.print(f"[red]error:[/red] --agent: expected one of {sorted(AGENTS)}, got {agent!r}")
            raise typer.Exit(2)
        if agent != "hrl":
            # the RL schedulers of the literature train with their own algorithm (rivals.actor_critic)
            import importlib

            from hrlsched.rivals.actor_critic import train_command

            if level != "1":  # refused rather than silently dropped
                err.print(f"[red]error:[/red] --level: only --agent hrl takes it; {agent} has its own level")
                raise typer.Exit(2)

            module, _, attr = AGENTS[agent].partition(":")
            try:
                code = train_command(getattr(importlib.import_module(module), attr), scenario=scenario, out=out,
                                     minutes=minutes, steps=steps, workers=workers,
                                     seeds=parse_seeds(seeds) if seeds else None, overrides=list(set_ or []),
                                     resume=resume, seed=seed, init=init, backend=backend, log=err,
                                     configure=lambda cfg: apply_options(cfg, option or []))
            except (ValueError, TypeError) as e:
                err.print(f"[red]error:[/red] {e}")
                raise typer.Exit(2) from None
            raise typer.Exit(code or 0)

        def settings(cfg: TrainConfig) -> None:
            if seeds:
                cfg.train_seeds = parse_seeds(seeds)
            apply_options(cfg, option or [])

        try:
            cfg = run_config(out, TrainConfig, resume=resume, minutes=minutes, steps=steps, default_minutes=60.0,
                             configure=settings, scenario=scenario, overrides=list(set_ or []), level=level,
                             seed=seed, workers=workers)
            cfg.validate()
            trainer = Trainer(cfg, out, init=str(init) if init else None, resume=resume,
                              log=lambda s: err.print(s, markup=False, highlight=False),
                              pool=_pool(backend, cfg.workers))
        except (ValueError, TypeError, CheckpointError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        if not resume:
            write_config(out, cfg)

        def progress(row: dict) -> None:
            v = row.get("valid_avg_jct_h", math.nan)
            err.print(f"it {row['iteration']:4d}  steps {row['env_steps']:>9,d}  horizon {row['horizon_h']:.1f} h  "
                      f"return {row['return']:8.2f}  entropy {row['ent']:.3f}  "
                      + (f"valid JCT {v:.3f} h  " if v == v else "")
                      + f"best {row['best_valid_avg_jct_h']:.3f} h  {row['steps_per_s']:,.0f} steps/s  "
                      f"[{row['wall_s'] / 60:.1f} min]",
                      highlight=False)

        try:
            res = trainer.run(progress=progress)
        except KeyboardInterrupt:
            trainer.save()
            err.print(f"interrupted: checkpoint kept in {out / 'last.pt'}; continue with --resume")
            raise typer.Exit(130) from None
        print(f"trained {res['iterations']} iterations, {res['env_steps']:,} env steps in "
              f"{res['elapsed_s'] / 60:.1f} min; held-back avg JCT {res['final_valid_avg_jct_h']:.3f} h "
              f"(best {res['best_valid_avg_jct_h']:.3f} h, {out / 'best.pt'})")


def apply_options(cfg: object, items: list[str]) -> None:
    """Set ``--option name=value`` items on a training config (a dataclass),
    each value read as the type of its field; an unknown name or a value of
    the wrong type is refused with the names it could be."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in fields:
            raise ValueError(f"--option {item!r}: expected name=value with a name among {sorted(fields)}")
        setattr(cfg, name, _typed(name, getattr(cfg, name), str(fields[name].type), value))


def _typed(name: str, current: object, annotation: str, text: str) -> object:
    """``text`` as the type of the setting (YAML reads 3e-4 as a string); a
    setting that is None now takes the type its annotation names."""
    import yaml

    try:
        if isinstance(current, bool):
            v = yaml.safe_load(text)
            if not isinstance(v, bool):
                raise ValueError
            return v
        if (current is None or "None" in annotation) and text.strip().lower() in ("none", "null"):
            return None
        if isinstance(current, int) or current is None and annotation.startswith("int"):
            return int(text)
        if isinstance(current, float) or current is None and annotation.startswith("float"):
            return float(text)
        return yaml.safe_load(text)
    except ValueError:
        raise ValueError(f"--option {name}={text}: expected a value like {current!r} ({annotation})") from None


#: what ``--agent`` trains: the hrl agent (``hrlsched.agent.train``) or a rival's trainer ("module:class")
AGENTS = {"hrl": "hrlsched.agent.train:Trainer", "dl2": "hrlsched.rivals.dl2:Trainer",
          "harmony": "hrlsched.rivals.harmony:Trainer"}


def _pool(backend: str, workers: int):  # noqa: ANN202
    if backend == "ray":
        from hrlsched.agent.ray_pool import RayRolloutPool

        return RayRolloutPool(workers)
    from hrlsched.agent.rollout import RolloutPool

    return RolloutPool(workers)


def register_curve(app: typer.Typer) -> None:
    @app.command("train-curve")
    def train_curve(
        out: Annotated[Path, typer.Option(help="the plot (PNG); a CSV of the curve is written beside it")],
        run: Annotated[Optional[Path], typer.Option(help="a training run directory (metrics.csv, config.yaml)")] = None,  # noqa: UP045
        curve: Annotated[Optional[Path], typer.Option(help="instead of --run: an earlier curve's CSV (this command's), "  # noqa: UP045
                                                      "continued with the --tune searches that followed it")] = None,
        heuristic: Annotated[str, typer.Option(help="the heuristic drawn as a line")] = "optimus+pack",
        tune: Annotated[Optional[list[Path]], typer.Option(help="`hrlsched tune` directories whose searches followed "  # noqa: UP045
                                                           "this run's first evaluated weights (or the curve's last "
                                                           "point), in the order they ran (repeat the option): drawn "
                                                           "after them")] = None,
    ) -> None:
        """Plot held-back avg JCT against training wall time, with a heuristic's
        figure on the same seeds as a line; writes PNG and CSV. With
        ``--curve``, an earlier curve goes on with later searches (their
        wall time added after its last point); its heuristic line must be
        what the heuristic gives on the searches' held-back seeds."""
        import csv
        import json

        import numpy as np
        import yaml

        from hrlsched.agent.tune import parse_run
        from hrlsched.config import resolve_run_config
        from hrlsched.io import write_text
        from hrlsched.run import simulate
        from hrlsched.sim.metrics import summary

        err = Console(stderr=True, soft_wrap=True)
        if (run is None) == (curve is None):
            err.print("[red]error:[/red] give one of --run (a training run) and --curve (an earlier curve's CSV)")
            raise typer.Exit(2)
        tuned: list[tuple[float, float]] = []
        ref_before: float | None = None
        if run is not None:
            try:
                cfg = yaml.safe_load((run / "config.yaml").read_text())
                rows = list(csv.DictReader((run / "metrics.csv").open()))
            except (OSError, yaml.YAMLError) as e:
                err.print(f"[red]error:[/red] --run {run}: {e}")
                raise typer.Exit(2) from None
            pts = [(float(r["wall_s"]) / 60, float(r["valid_avg_jct_h"])) for r in rows
                   if r.get("valid_avg_jct_h") not in ("", "nan", None)]
            seeds, scenario, overrides, title = cfg["valid_seeds"], cfg["scenario"], cfg["overrides"], \
                f"level {cfg['level']}"
            name = run.name
        else:
            assert curve is not None
            try:
                rows = list(csv.DictReader(curve.open()))
                pts = [(float(r["wall_min"]), float(r["valid_avg_jct_h"])) for r in rows if r["phase"] == "train"]
                tuned = [(float(r["wall_min"]), float(r["valid_avg_jct_h"])) for r in rows if r["phase"] == "tune"]
                before = {(r["heuristic"], r["heuristic_avg_jct_h"]) for r in rows}
            except (OSError, KeyError, ValueError) as e:
                err.print(f"[red]error:[/red] --curve {curve}: not a train-curve CSV ({e})")
                raise typer.Exit(2) from None
            if not pts or len(before) != 1 or next(iter(before))[0] != heuristic or not tune:
                err.print(f"[red]error:[/red] --curve {curve}: expected a train-curve CSV with training points and "
                          f"one heuristic line, {heuristic} (--heuristic), and --tune searches to continue it")
                raise typer.Exit(2)
            ref_before = float(next(iter(before))[1])
            try:
                first = yaml.safe_load((tune[0] / "config.yaml").read_text())
                (scenario, _), = [parse_run(r) for r in first["runs"]]  # one scenario: the curve's
                seeds, overrides = first["valid_seeds"], first.get("overrides", [])
            except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as e:
                err.print(f"[red]error:[/red] --tune {tune[0]}: expected a search on one scenario ({e})")
                raise typer.Exit(2) from None
            title, name = "level 1", f"PPO ({curve.name})"  # (searches tune level-1 checkpoints only)
        # The searches branch off the run's first evaluated (cloned) weights: their time starts there,
        # and a continued curve's goes on from its last search.
        t = tuned[-1][0] if tuned else pts[0][0]
        for d in tune or []:
            try:
                ts = json.loads((d / "summary.json").read_text())
                tseeds = yaml.safe_load((d / "config.yaml").read_text())["valid_seeds"]
            except (OSError, ValueError, KeyError, yaml.YAMLError) as e:
                err.print(f"[red]error:[/red] --tune {d}: {e}")
                raise typer.Exit(2) from None
            if "origin" not in ts:
                err.print(f"[red]error:[/red] --tune {d}: a search of an older version (no 'origin' in summary.json)")
                raise typer.Exit(2)
            if list(tseeds) != list(seeds):
                err.print(f"[red]error:[/red] --tune {d}: held-back seeds {tseeds}, the run's are {seeds}")
                raise typer.Exit(2)
            v = ts["valid_avg_jct_s"]
            if not tuned:
                tuned.append((t, v[ts["origin"]] / 3600))  # where the searches started: the weights as cloned
            t += ts["elapsed_s"] / 60
            tuned.append((t, v[ts["chosen"]] / 3600))
        ref = float(np.mean([summary(simulate(resolve_run_config(scenario, heuristic, s, overrides)),
                                     heuristic, scenario)["avg_jct_s"] for s in seeds])) / 3600
        if ref_before is not None and abs(ref - ref_before) > 5e-5:
            err.print(f"[red]error:[/red] --curve {curve}: its {heuristic} line is {ref_before:.4f} h, but {heuristic} "
                      f"gives {ref:.4f} h on the searches' held-back seeds {seeds} of {scenario}: not the same curve")
            raise typer.Exit(2)
        lines = ["phase,wall_min,valid_avg_jct_h,heuristic,heuristic_avg_jct_h"]
        lines += [f"train,{m:.2f},{j:.4f},{heuristic},{ref:.4f}" for m, j in pts]
        lines += [f"tune,{m:.2f},{j:.4f},{heuristic},{ref:.4f}" for m, j in tuned]
        write_text(out.with_suffix(".csv"), "\n".join(lines) + "\n")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([m for m, _ in pts], [j for _, j in pts], marker="o", label=f"hrl (greedy), {name}")
        if tuned:
            names = ", ".join(d.name for d in tune or [])
            ax.plot([m for m, _ in tuned], [j for _, j in tuned], marker="s",
                    label=("searches: " if run is not None else "searches, the last: ") + names)
        ax.axhline(ref, color="k", ls="--", label=heuristic)
        ax.set_xlabel("training wall time (min)")
        ax.set_ylabel(f"avg JCT (h), seeds {seeds[0]}-{seeds[-1]}")
        ax.set_title(f"hrl training on {scenario} ({title})")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
        print(f"wrote {out} and {out.with_suffix('.csv')}; {heuristic} {ref:.3f} h, best hrl "
              f"{min(j for _, j in pts + tuned):.3f} h")
