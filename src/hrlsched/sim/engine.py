"""``Simulator``: a whole run of one scheduler over a workload.

A short loop over the steppable engine (``sim.simulation.Simulation``): reset,
then ask the scheduler at each decision point and step until the episode is
over. The scheduler's own settings choose the decision points (unless the
engine config names them), how many workers it may put on a GPU, and whether
it sees the truth (``oracle``) or the predictor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import Scheduler
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.perf.base import PerformanceModel
from hrlsched.sim.result import SimResult
from hrlsched.sim.simulation import EngineConfig, Simulation, StepResult

__all__ = ["EngineConfig", "SimResult", "Simulation", "Simulator", "StepResult"]


class Simulator:
    def __init__(
        self,
        topology: Topology,
        jobs: Sequence[Job],
        perf: PerformanceModel,
        scheduler: Scheduler,
        config: EngineConfig | None = None,
        catalogue: Mapping[str, ModelProfile] | None = None,
        seed: int = 0,
        predictor: PerformanceModel | None = None,
        sample_jobs: Callable[[int], list[Job]] | None = None,
    ) -> None:
        cfg = config or EngineConfig()
        if cfg.decision_points is None:
            points, every = scheduler.points()
            cfg = dataclasses.replace(cfg, decision_points=points, decision_every=every)
        self.topo = topology
        self.perf = perf
        self.scheduler = scheduler
        self.cfg = cfg
        self.seed = seed
        self.simulation = Simulation(
            topology, jobs, perf, cfg, catalogue, max_tasks_per_gpu=scheduler.max_tasks_per_gpu,
            oracle=scheduler.oracle, predictor=predictor,
        )
        self.simulation.sample_jobs = sample_jobs  # the scenario's workload from another seed (a lookahead's futures)
        self.jobs = self.simulation.jobs

    def run(self, progress: Callable[[float, int, int], None] | None = None) -> SimResult:
        sim, sched = self.simulation, self.scheduler
        view = sim.reset(self.seed)
        sched.reset(self.topo, np.random.default_rng(self.seed))
        sched.bind(sim)
        n, finished = len(self.jobs), 0
        while view is not None:
            out = sim.step(sched.decide(view))
            view = out.view
            if progress is not None:
                finished += len(out.completions)
                progress(out.time_s, finished, n)
        return sim.result()
