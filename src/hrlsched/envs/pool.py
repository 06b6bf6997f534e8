"""The workload pool of an environment: one scenario and a list of training
seeds; each ``reset`` draws a seed from the environment's ``np_random`` and
runs that seed's workload. Scenarios and simulations are built once per seed
and reused (a ``Simulation`` starts a fresh state at each ``reset``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from hrlsched.config import ScenarioConfig, resolve_run_config
from hrlsched.core.job import Job
from hrlsched.scenario import BuiltScenario, build_scenario
from hrlsched.sim.simulation import Simulation

JobTransform = Callable[[list[Job], np.random.Generator], list[Job]]


class WorkloadPool:
    """``scenario``: a built-in scenario name, a scenario YAML path, or a
    ``ScenarioConfig``; ``overrides``: ``--set``-like ``key=value`` items
    relative to the scenario (e.g. ``workload.jobs=10``); ``seeds``: the
    training seeds (workload seeds of ``build_scenario``). ``transform``: an
    optional function applied to each seed's jobs (e.g. to leave
    architectures open in a test), given a generator seeded by the seed."""

    def __init__(
        self,
        scenario: str | ScenarioConfig = "default",
        seeds: Sequence[int] = (0,),
        overrides: Sequence[str] = (),
        transform: JobTransform | None = None,
    ) -> None:
        if isinstance(scenario, ScenarioConfig):
            if overrides:
                raise ValueError("WorkloadPool: overrides apply to a scenario name or file, not a ScenarioConfig")
            self.config = scenario
        else:
            self.config = resolve_run_config(scenario, overrides=list(overrides)).scenario
        self.seeds = [int(s) for s in seeds]
        if not self.seeds:
            raise ValueError("WorkloadPool: seeds: expected at least one training seed")
        self.transform = transform
        self._built: dict[int, BuiltScenario] = {}

    @property
    def name(self) -> str:
        return self.config.name

    def built(self, seed: int) -> BuiltScenario:
        b = self._built.get(seed)
        if b is None:
            b = build_scenario(self.config, seed)
            if self.transform is not None:
                b = dataclasses.replace(b, jobs=self.transform(list(b.jobs), np.random.default_rng([seed, 0x7F])))
            self._built[seed] = b
        return b

    def draw(self, rng: np.random.Generator) -> int:
        """A training seed, drawn from ``rng`` (the environment's ``np_random``)."""
        return self.seeds[int(rng.integers(len(self.seeds)))]

    def simulation(self, seed: int, max_tasks_per_gpu: int, decision_points: str | None,
                   decision_every: int = 1) -> Simulation:
        b = self.built(seed)
        eng = b.engine
        points = eng.decision_points or decision_points
        if points is not None:
            eng = dataclasses.replace(eng, decision_points=points,
                                      decision_every=eng.decision_every if eng.decision_points else decision_every)
        return Simulation(b.topology, b.jobs, b.perf, eng, max_tasks_per_gpu=max_tasks_per_gpu,
                          predictor=b.predictor)

    def max_jobs(self) -> int:
        """The most jobs any seed's workload has (an upper bound on active jobs)."""
        return max(len(self.built(s).jobs) for s in self.seeds)
