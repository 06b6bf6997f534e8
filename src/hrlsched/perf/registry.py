"""Name -> performance-model backend."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hrlsched.cluster.topology import Topology
from hrlsched.perf.base import PerformanceModel
from hrlsched.perf.optimus import OptimusModel
from hrlsched.workload.catalogue import ModelProfile

PerfFactory = Callable[..., PerformanceModel]
PERF_MODELS: dict[str, PerfFactory] = {"optimus": OptimusModel}


def register_perf_model(name: str, factory: PerfFactory) -> None:
    PERF_MODELS[name] = factory


def make_perf_model(
    name: str, topology: Topology, catalogue: Mapping[str, ModelProfile], **options: Any
) -> PerformanceModel:
    try:
        factory = PERF_MODELS[name]
    except KeyError:
        raise ValueError(f"perf.backend: unknown performance model {name!r}; expected one of {sorted(PERF_MODELS)}") from None
    return factory(topology, catalogue, **options)
