"""From a scenario config to the pieces of a run: topology, performance
model, workload and engine settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.config import ScenarioConfig, TraceWorkload
from hrlsched.perf.base import PerformanceModel
from hrlsched.perf.registry import make_perf_model
from hrlsched.sim.engine import EngineConfig
from hrlsched.workload.catalogue import CATALOGUE
from hrlsched.workload.job import Job
from hrlsched.workload.synthetic import generate_synthetic
from hrlsched.workload.trace import load_trace, resolve_path, select, to_jobs

WorkloadBuilder = Callable[[Any, PerformanceModel, np.random.Generator], list[Job]]
def build_trace(cfg: TraceWorkload, perf: PerformanceModel, rng: np.random.Generator) -> list[Job]:
    path = resolve_path(cfg.path)
    if not path.exists():
        raise FileNotFoundError(
            f"workload.path: {path} not found. This scenario needs the public data folder: set HRLSCHED_DATA "
            f"or place it at ../shared/data (see its SOURCES.md for where each file comes from)"
        )
    records = select(load_trace(path, cfg.format), cfg.window_start_s, cfg.window_end_s, cfg.sample, cfg.load_factor, rng)
    return to_jobs(records, perf, rng, models=cfg.models, assignment=cfg.model_assignment,
                   allreduce_fraction=cfg.allreduce_fraction, oversize=cfg.oversize, source=str(path))


WORKLOAD_BUILDERS: dict[str, WorkloadBuilder] = {"synthetic": generate_synthetic, "trace": build_trace}


@dataclass
class BuiltScenario:
    config: ScenarioConfig
    topology: Topology
    perf: PerformanceModel
    jobs: list[Job]
    engine: EngineConfig


def build_scenario(cfg: ScenarioConfig, seed: int) -> BuiltScenario:
    topo = Topology.from_spec(cfg.cluster)
    perf = make_perf_model(cfg.perf.backend, topo, CATALOGUE, **cfg.perf.options)
    # The workload has its own stream so that a policy's randomness never changes the jobs.
    rng = np.random.default_rng([seed, 0x5EED])
    builder = WORKLOAD_BUILDERS[cfg.workload.kind]
    jobs = builder(cfg.workload, perf, rng)
    eng = EngineConfig(
        round_s=cfg.sim.round_s,
        max_time_s=cfg.sim.max_time_s,
        restart_s=cfg.sim.restart_s,
        restart_on_first_start=cfg.sim.restart_on_first_start,
    )
    return BuiltScenario(cfg, topo, perf, jobs, eng)
