"""The simulator: engine, metrics and recorder. The scheduler contract is in
``hrlsched.contract``."""

from hrlsched.contract import ClusterView, Decision, InvalidDecisionError
from hrlsched.sim.engine import EngineConfig, SimResult, Simulator

__all__ = ["ClusterView", "Decision", "EngineConfig", "InvalidDecisionError", "SimResult", "Simulator"]
