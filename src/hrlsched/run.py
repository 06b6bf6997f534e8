"""One simulation run, from a resolved config to a run directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hrlsched.config import RunConfig, dump_run_config
from hrlsched.contract import Scheduler
from hrlsched.outdir import prepare_run_dir
from hrlsched.policies.registry import make_scheduler
from hrlsched.scenario import build_scenario
from hrlsched.sim.engine import SimResult, Simulator
from hrlsched.sim.recorder import write_run


def simulate(cfg: RunConfig, progress: Callable[[float, int, int], None] | None = None,
             scheduler: Scheduler | None = None) -> SimResult:
    """``scheduler``: one to run instead of a new one made from ``cfg.policy``
    (e.g. one that a caller built from it and instruments)."""
    built = build_scenario(cfg.scenario, cfg.seed)
    if scheduler is None:
        scheduler = make_scheduler(cfg.policy, checkpoint=cfg.checkpoint)
    sim = Simulator(built.topology, built.jobs, built.perf, scheduler, built.engine, seed=cfg.seed,
                    predictor=built.predictor, sample_jobs=built.sample_jobs)
    return sim.run(progress)


def run_to_dir(
    cfg: RunConfig,
    out: str | Path,
    progress: Callable[[float, int, int], None] | None = None,
    plots: bool = True,
    force: bool = False,
) -> dict[str, Any]:
    """Simulate and write the run directory; ``out`` is checked first (see
    ``hrlsched.outdir``), so a wrong directory fails before the simulation."""
    import yaml

    prepare_run_dir(out, yaml.safe_dump(dump_run_config(cfg), sort_keys=False), force=force)
    res = simulate(cfg, progress)
    return write_run(out, res, dump_run_config(cfg), cfg.policy, cfg.scenario.name, plots_on=plots)
