"""``hrlsched tune``: a search over the settings of a level-1 checkpoint's
hint and rule weights (``HintConfig``) by whole episodes of training
workloads (``hrlsched.agent.tune``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def tune(
        out: Annotated[Path, typer.Option(help="directory: config.yaml, search.csv, weights/, best-policy.pt")],
        checkpoint: Annotated[Optional[Path], typer.Option(help="a level-1 checkpoint trained with a hint (e.g. a "  # noqa: UP045
                                                           "cloned one)")] = None,
        hint_alone: Annotated[bool, typer.Option(help="search the hint heuristic alone (pack placing, no network, "
                                                 "no checkpoint)")] = False,
        runs: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
            "--runs", help="training runs SCENARIO:SEEDS (seeds >= 1000), e.g. default:1000-1009; repeat for "
            "several scenarios (the score: the geometric mean of their mean average JCT)")] = None,
        hint: Annotated[str, typer.Option(help="the hint's settings at every point but the origin, as "
                                          "`hrlsched checkpoint show` prints them, e.g. "
                                          "'menu,f=0.2,first=remaining,r=hint'")] = "",
        vary: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
            "--vary", help="an axis of the search, SETTING=v1,v2,... (e.g. g=0,3,8 or a=1,1.25); repeat: the "
            "points are their product [default: g=0,1,2,3,5,10]")] = None,
        valid_seeds: Annotated[str, typer.Option(help="held-back seeds of the same scenarios")] = "100-104",
        workers: Annotated[int, typer.Option(min=1, help="episodes run in parallel")] = 2,
        set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a config value of every run: key=value")] = None,  # noqa: UP045
    ) -> None:
        """Search the hint's settings and rule weights on training workloads; what
        is already in OUT/search.csv is not run again."""
        from hrlsched.agent.tune import TuneConfig, run
        from hrlsched.errors import CheckpointError
        from hrlsched.seeds import parse_seeds

        err = Console(stderr=True)
        try:
            cfg = TuneConfig(checkpoint=str(checkpoint or ""), hint_alone=hint_alone, runs=list(runs or ["default:1000-1009"]),
                             overrides=list(set_ or []), hint=hint, vary=list(vary or ["g=0,1,2,3,5,10"]),
                             valid_seeds=parse_seeds(valid_seeds), workers=workers)
            res = run(cfg, out, log=lambda s: err.print(s, markup=False, highlight=False))
        except (CheckpointError, ValueError, FileNotFoundError) as e:
            err.print(f"[red]error:[/red] {e}", highlight=False)
            raise typer.Exit(2) from None
        print("hint settings: mean average JCT per training scenario:")
        for name, per in res["train"].items():
            figures = ", ".join(f"{sc} {v / 3600:.3f} h" for sc, v in per.items())
            print(f"  {name:<40} {figures}" + ("   <- chosen" if name == res["label"] else ""))
        print(f"held-back seeds {cfg.valid_seeds}: " + ", ".join(
            f"{name} " + ", ".join(f"{sc} {v / 3600:.3f} h" for sc, v in per.items())
            for name, per in res["valid"].items()))
        if not hint_alone:
            print(f"policy: {out / 'best-policy.pt'} (hrlsched simulate --policy hrl --checkpoint ...)")
