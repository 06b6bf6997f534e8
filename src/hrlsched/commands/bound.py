"""``hrlsched bound``: a lower bound on average JCT, per seed
(``experiments.bound``: each job alone on the cluster at its best
allocation, no queueing, no interference)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def bound(
        scenario: Annotated[str, typer.Option(help="built-in scenario name or scenario YAML")],
        seeds: Annotated[int, typer.Option(min=1, help="seeds 0..N-1")] = 5,
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a config value: key=value")] = None,  # noqa: UP045
        json_out: Annotated[bool, typer.Option("--json", help="one JSON object: per seed and the mean")] = False,
    ) -> None:
        """Print a lower bound on average JCT for each seed and their mean."""
        from hrlsched.config import ConfigError, resolve_run_config
        from hrlsched.experiments.bound import BestRates, lower_bound
        from hrlsched.scenario import build_scenario

        err = Console(stderr=True)
        per_seed: dict[int, dict[str, float]] = {}
        try:
            cfg = resolve_run_config(scenario, overrides=set_ or []).scenario
            rates = None
            for seed in range(seeds):
                built = build_scenario(cfg, seed)
                rates = rates or BestRates(built.perf)
                per_seed[seed] = lower_bound(built, rates=rates)
        except (ConfigError, ValueError, FileNotFoundError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        mean = sum(r["avg_jct_s"] for r in per_seed.values()) / len(per_seed)
        if json_out:
            print(json.dumps({"scenario": cfg.name, "seeds": {str(k): v for k, v in per_seed.items()},
                              "mean_avg_jct_s": mean}, indent=2))
            return
        print(f"lower bound on average JCT, scenario {cfg.name} (each job alone at its best allocation)")
        print(f"{'seed':>4} {'jobs':>5} {'avg_jct_h':>9} {'p50_jct_h':>9} {'run_h':>7} {'launch_s':>8} {'wait_s':>7}")
        for seed, r in per_seed.items():
            print(f"{seed:>4} {int(r['jobs']):>5} {r['avg_jct_s'] / 3600:>9.3f} {r['p50_jct_s'] / 3600:>9.3f} "
                  f"{r['avg_run_s'] / 3600:>7.3f} {r['avg_launch_s']:>8.1f} {r['avg_wait_s']:>7.1f}")
        print(f"mean {mean / 3600:.3f} h ({mean:.0f} s) over {len(per_seed)} seeds")
