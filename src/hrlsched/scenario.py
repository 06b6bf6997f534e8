"""From a scenario config to the pieces of a run: topology, performance
model, workload and engine settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.config import ScenarioConfig
from hrlsched.core.catalogue import CATALOGUE
from hrlsched.core.job import Job
from hrlsched.core.sizing import WorkSizer
from hrlsched.data import WHERE, DataMissingError, check_data, needs_data, resolve_path
from hrlsched.perf.base import PerformanceModel
from hrlsched.perf.registry import make_perf_model
from hrlsched.sim.engine import EngineConfig
from hrlsched.workload.generator import build_generated_workload
from hrlsched.workload.synthetic import generate_synthetic
from hrlsched.workload.trace import build_trace_workload

WorkloadBuilder = Callable[[Any, WorkSizer, np.random.Generator], list[Job]]
WORKLOAD_BUILDERS: dict[str, WorkloadBuilder] = {
    "synthetic": generate_synthetic,
    "trace": build_trace_workload,
    "generated": build_generated_workload,
}


def _resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """``${data}`` in a string option (e.g. the measured backend's traces_dir)
    -> the data folder, which must then exist."""
    out = {}
    for k, v in options.items():
        if isinstance(v, str) and needs_data(v):
            path = resolve_path(v)
            if not path.exists():
                raise DataMissingError(f"perf.options.{k}: {path} not found. This scenario needs the public data folder: {WHERE}")
            v = str(path)
        out[k] = v
    return out


@dataclass
class BuiltScenario:
    config: ScenarioConfig
    topology: Topology
    perf: PerformanceModel
    jobs: list[Job]
    engine: EngineConfig
    predictor: PerformanceModel | None = None  # None: policies predict with ``perf``

    def sample_jobs(self, seed: int) -> list[Job]:
        """The workload this scenario builds for ``seed`` (a trace's builder may
        give the same jobs for every seed)."""
        return _build_jobs(self.config, self.perf, seed)


def _build_jobs(cfg: ScenarioConfig, perf: PerformanceModel, seed: int) -> list[Job]:
    # The workload has its own stream so that a policy's randomness never changes the jobs.
    rng = np.random.default_rng([seed, 0x5EED])
    # The builders get what sizes work (core.sizing), not the performance model.
    return WORKLOAD_BUILDERS[cfg.workload.kind](cfg.workload, perf.work_sizer(), rng)


def build_scenario(cfg: ScenarioConfig, seed: int) -> BuiltScenario:
    check_data(cfg.name, list(cfg.needs_data))
    topo = Topology.from_spec(cfg.cluster)
    perf = make_perf_model(cfg.perf.backend, topo, CATALOGUE, **_resolve_options(cfg.perf.options))
    jobs = _build_jobs(cfg, perf, seed)
    eng = EngineConfig(
        round_s=cfg.sim.round_s,
        max_time_s=cfg.sim.max_time_s,
        restart_s=cfg.sim.restart_s,
        restart_on_first_start=cfg.sim.restart_on_first_start,
        decision_points=cfg.sim.decision_points,
        decision_every=cfg.sim.decision_every,
        restart_scale=cfg.sim.restart_scale,
        max_restarts=cfg.sim.max_restarts,
        predictor_noise=cfg.predictor.noise,
        work_noise=cfg.predictor.work_noise,
    )
    pred = cfg.predictor
    predictor = (
        make_perf_model(pred.backend, topo, CATALOGUE, **_resolve_options(pred.options)) if pred.backend else None
    )
    return BuiltScenario(cfg, topo, perf, jobs, eng, predictor)
