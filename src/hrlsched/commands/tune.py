"""``hrlsched tune``: fit the hint-gap weight of a level-1 checkpoint, and
its hint's remaining weight and keep threshold, by a search over whole
episodes of training workloads (``hrlsched.agent.tune``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def tune(
        checkpoint: Annotated[Path, typer.Option(help="a level-1 checkpoint trained with a hint (e.g. a cloned one)")],
        out: Annotated[Path, typer.Option(help="directory: config.yaml, search.csv, weights/, best-policy.pt")],
        scenario: Annotated[str, typer.Option(help="built-in scenario name or scenario YAML")] = "default",
        grid: Annotated[str, typer.Option(help="weights to try, comma-separated (units of nets.GAP_SCALE)")] =
            "0,1,2,3,5,10",
        remaining_weights: Annotated[str, typer.Option(help="the hint's remaining_weight values to try, "
                                                       "comma-separated (0: the paper's optimus)")] = "0",
        keep: Annotated[str, typer.Option(help="the hint's keep_s values to try (seconds), comma-separated")] = "0",
        hint_on_menu: Annotated[bool, typer.Option(help="the hint's worker counts limited to the agent's menu")] =
            False,
        keep_frac: Annotated[float, typer.Option(help="the hint's keep threshold as a share of a job's remaining "
                                                 "time (Optimus.keep_frac), at every point")] = 0.0,
        reserve_running: Annotated[str, typer.Option(help="which running jobs hold their room until their turn: "
                                                     "all, none or hint (those the hint keeps)")] = "all",
        first_order: Annotated[str, typer.Option(help="the order of the hint's first workers: arrival or "
                                                 "remaining (shortest predicted remaining time first)")] = "arrival",
        window: Annotated[str, typer.Option(help="which jobs a point decides (the first max_jobs): in arrival "
                                            "order, or hint (the jobs the hint runs first; decided in arrival "
                                            "order), or hint-order (decided in the hint's order)")] = "arrival",
        recheck_s: Annotated[Optional[float], typer.Option(help="a decision point also this many seconds after "  # noqa: UP045
                                                       "the last, as the hint re-allocates (optimus: 600); "
                                                       "default: at arrivals and completions only")] = None,
        observe_rounds: Annotated[bool, typer.Option(help="the hint observes each job's loss once per round it ran "
                                                     "(Optimus.observe_rounds), not once per decision point")] = False,
        remaining_from: Annotated[str, typer.Option(help="where the hint reads each job's remaining steps: fit "
                                                    "(the paper's loss-curve fit) or view (the predictor's "
                                                    "remaining work; Optimus.remaining_from)")] = "fit",
        bonus: Annotated[Optional[float], typer.Option(help="a weight added to the score of the hint's slot "  # noqa: UP045
                                                   "(the network follows the hint more; NetConfig.hint_bonus)")] = None,
        seeds: Annotated[str, typer.Option(help="training seeds (>= 1000), e.g. 1000-1009")] = "1000-1009",
        workers: Annotated[int, typer.Option(min=1, help="episodes run in parallel")] = 2,
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a config value: key=value")] = None,  # noqa: UP045
    ) -> None:
        """Fit the agent's hint-gap weight on training workloads; what is
        already in OUT/search.csv is not run again."""
        from hrlsched.agent.tune import TuneConfig, label, run
        from hrlsched.commands.train import parse_seeds
        from hrlsched.errors import CheckpointError

        err = Console(stderr=True)
        from hrlsched.envs.hint import RESERVE_RUNNING

        reserve = RESERVE_RUNNING.get(reserve_running)
        if reserve is None:
            err.print(f"[red]error:[/red] --reserve-running {reserve_running!r}: expected all, none or hint")
            raise typer.Exit(2)
        lists = {}
        for opt, text in (("--grid", grid), ("--remaining-weights", remaining_weights), ("--keep", keep)):
            try:
                lists[opt] = [float(x) for x in text.split(",") if x.strip()]
            except ValueError:
                err.print(f"[red]error:[/red] {opt} {text!r}: expected comma-separated numbers")
                raise typer.Exit(2) from None
        try:
            cfg = TuneConfig(checkpoint=str(checkpoint), scenario=scenario, overrides=list(set_ or []),
                             grid=lists["--grid"], remaining_weights=lists["--remaining-weights"],
                             keep_s=lists["--keep"], hint_on_menu=hint_on_menu, keep_frac=keep_frac,
                             reserve_running=reserve, first_order=first_order, window=window, recheck_s=recheck_s,
                             observe_rounds=observe_rounds, remaining_from=remaining_from, bonus=bonus,
                             train_seeds=parse_seeds(seeds),
                             workers=workers)
            res = run(cfg, out, log=lambda s: err.print(s, markup=False, highlight=False))
        except (CheckpointError, ValueError, FileNotFoundError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        print("hint-gap weight / remaining weight / keep_s, mean average JCT over "
              f"{len(cfg.train_seeds)} training seeds:")
        for pt, v in res["train"].items():
            g, a, h = pt
            print(f"  {g:>6g} {a:>6g} {h:>7g}  {v / 3600:.3f} h" + ("   <- chosen" if pt == res["point"] else ""))
        print(f"held-back seeds {cfg.valid_seeds}: " + ", ".join(
            f"{label(pt)} {v / 3600:.3f} h" for pt, v in res["valid"].items()))
        print(f"policy: {out / 'best-policy.pt'} (hrlsched simulate --policy hrl --checkpoint ...)")
