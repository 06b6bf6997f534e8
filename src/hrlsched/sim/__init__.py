"""The simulator: the steppable engine (``Simulation``), the whole-run loop
(``Simulator``), metrics and recorder. The scheduler contract is in
``hrlsched.contract``."""

from hrlsched.contract import ClusterView, Decision, InvalidDecisionError
from hrlsched.sim.engine import Simulator
from hrlsched.sim.result import SimResult
from hrlsched.sim.simulation import EngineConfig, Simulation, StepResult
from hrlsched.sim.state import SimState

__all__ = [
    "ClusterView",
    "Decision",
    "EngineConfig",
    "InvalidDecisionError",
    "SimResult",
    "SimState",
    "Simulation",
    "Simulator",
    "StepResult",
]
