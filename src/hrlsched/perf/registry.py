"""Name -> performance-model backend. Backends are imported on first use, so
that a run pays only for the one it uses."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from hrlsched.cluster.topology import Topology
from hrlsched.core.catalogue import ModelProfile
from hrlsched.perf.base import PerformanceModel

PerfFactory = Callable[..., PerformanceModel]
# name -> "module:class"
PERF_MODELS: dict[str, str] = {
    "optimus": "hrlsched.perf.optimus:OptimusModel",
    "analytic": "hrlsched.perf.analytic:AnalyticModel",
    "measured": "hrlsched.perf.measured:MeasuredModel",
}


def perf_model_class(name: str) -> PerfFactory:
    try:
        target = PERF_MODELS[name]
    except KeyError:
        raise ValueError(f"perf.backend: unknown performance model {name!r}; expected one of {sorted(PERF_MODELS)}") from None
    mod, _, cls = target.partition(":")
    return getattr(importlib.import_module(mod), cls)


def make_perf_model(
    name: str, topology: Topology, catalogue: Mapping[str, ModelProfile], **options: Any
) -> PerformanceModel:
    factory = perf_model_class(name)
    try:
        return factory(topology, catalogue, **options)
    except TypeError as e:
        raise ValueError(f"perf.options: invalid options for backend {name!r}: {e}") from None
