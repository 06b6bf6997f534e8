"""The simulator: engine, view/decision contract, metrics and recorder."""

from hrlsched.sim.engine import EngineConfig, SimResult, Simulator
from hrlsched.sim.view import ClusterView, Decision, InvalidDecisionError

__all__ = ["ClusterView", "Decision", "EngineConfig", "InvalidDecisionError", "SimResult", "Simulator"]
