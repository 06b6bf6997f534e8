"""``hrlsched train-es``: evolution strategies on the agent's learned parts (agent/es.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command("train-es")
    def train_es(
        scenario: Annotated[str, typer.Option(help="built-in scenario name or scenario YAML to train on")] = "hetero",
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a scenario value: key=value (repeatable)")] = None,  # noqa: UP045
        init: Annotated[Optional[Path], typer.Option(help="the checkpoint whose encoders are kept (default: the shipped one)")] = None,  # noqa: UP045
        iterations: Annotated[int, typer.Option(min=1)] = 12,
        pairs: Annotated[int, typer.Option(min=1, help="antithetic pairs of perturbations per iteration")] = 6,
        seeds_per_pair: Annotated[int, typer.Option(min=1, help="training workloads each pair is scored on")] = 2,
        sigma: Annotated[float, typer.Option(help="perturbation scale")] = 0.5,
        lr: Annotated[float, typer.Option(help="Adam's step")] = 0.2,
        eval_every: Annotated[int, typer.Option(min=1, help="iterations between held-back evaluations")] = 3,
        held_back: Annotated[str, typer.Option(help="held-back seeds of the curve (never 0-99)")] = "100-119",
        seed: Annotated[int, typer.Option(help="the perturbations' random stream")] = 0,
        workers: Annotated[int, typer.Option(min=1, help="parallel processes")] = 2,
        method: Annotated[str, typer.Option(help="es: the gradient estimate and Adam; cem: the cross-entropy method")] = "es",
        learn: Annotated[str, typer.Option(help="the parts learned, comma-separated: residual (per job and slot), "
                                           "selector (another heuristic's whole decision at a point), "
                                           "placement (one of a few candidate placements per job placed)")] = "residual",
        case: Annotated[Optional[list[str]], typer.Option("--case", help="train on several cases in turn, "  # noqa: UP045
                                                          "SCENARIO[@key=value,...] (repeatable; instead of --scenario/--set)")] = None,
        placement: Annotated[Optional[str], typer.Option(help="the placement of the agent's rules, e.g. migrate "  # noqa: UP045
                                                         "(default: the starting checkpoint's)")] = None,
        fitness: Annotated[str, typer.Option(help="a sample's score on the iteration's workloads: mean (its mean gain "
                                             "over the rules) or ranks (its mean rank, workload by workload)")] = "mean",
        select: Annotated[str, typer.Option(help="which held-back evaluation becomes best.pt: mean (the highest mean "
                                            "gain) or worst-case (the case that loses most beyond its 95% interval "
                                            "loses least; ties by the mean)")] = "mean",
        drop_feature: Annotated[Optional[list[str]], typer.Option("--drop-feature", help="a selector or residual feature "  # noqa: UP045
                                                                  "held at weight 0, not read: its ablation, with "
                                                                  "the same draws (repeatable)")] = None,
        out: Annotated[Path, typer.Option(help="folder: config.yaml, state.pt, best.pt, curve.csv")] = Path("runs/es"),
        resume: Annotated[bool, typer.Option("--resume", help="continue the training in OUT")] = False,
    ) -> None:
        """Learn the agent's residual or point selector (its rules kept) with evolution strategies,
        scoring whole episodes against the rules on fresh training workloads; print a
        line per iteration with the held-back gain over the rules (seeds 100-119)."""
        from hrlsched.agent.es import ESConfig, train
        from hrlsched.seeds import parse_seeds

        err = Console(stderr=True)
        try:
            cfg = ESConfig(scenario=scenario, overrides=tuple(set_ or []), init=None if init is None else str(init),
                           iterations=iterations, pairs=pairs, seeds_per_pair=seeds_per_pair, sigma=sigma, lr=lr,
                           eval_every=eval_every, held_back=tuple(parse_seeds(held_back)), seed=seed, workers=workers,
                           method=method, learn=tuple(x.strip() for x in learn.split(",") if x.strip()),
                           cases=tuple(case or []), placement=placement, fitness=fitness, select=select,
                           drop=tuple(drop_feature or []))

            def log(r: dict) -> None:
                held = "" if r["held_back_gain_pct"] is None else \
                    f", held-back gain {r['held_back_gain_pct']:+.2f}% ± {r['held_back_gain_ci95']:.2f}" \
                    f" (worst case {r['held_back_worst_case']} {r['held_back_worst_case_pct']:+.2f}%)"
                if r["iteration"] == 0:  # the starting weights, measured before any update
                    print(f"iteration 0 (the start): {r['wall_s']:.0f} s{held}", flush=True)
                    return
                print(f"iteration {r['iteration']}: {r['wall_s']:.0f} s, {r['episodes']} episodes, "
                      f"{r['steps_per_s']:.0f} agent choices (environment steps) per s, train gain "
                      f"{r['train_gain_pct']:+.2f}%{held}", flush=True)

            state = train(cfg, out, resume, log)
        except ValueError as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            print(f"interrupted: the last finished iteration is kept in {out}/state.pt (--resume continues)")
            raise typer.Exit(130) from None
        print(f"best held-back gain {state.best_gain:+.2f}% ({out}/best.pt{'' if (Path(out) / 'best.pt').is_file() else ': none above the rules, not written'}); "
              f"curve in {out}/curve.csv")
