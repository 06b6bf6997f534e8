"""Performance models: speeds of running jobs given where all jobs run."""

from hrlsched.perf.base import PerformanceModel
from hrlsched.perf.optimus import OptimusModel, optimus_iteration_time, optimus_speed
from hrlsched.perf.registry import PERF_MODELS, make_perf_model

__all__ = [
    "PERF_MODELS",
    "OptimusModel",
    "PerformanceModel",
    "make_perf_model",
    "optimus_iteration_time",
    "optimus_speed",
]
