"""Gymnasium environments of the scheduler: ``hrlsched/Allocation-v0``
(level 1), ``hrlsched/Placement-v0`` (level 2), ``hrlsched/Hierarchical-v0``
(both), and ``hrlsched/Flat-v0`` (one level: workers placed one by one, their
count emerging), registered on import of this package."""

from __future__ import annotations

import gymnasium

from hrlsched.envs.allocation import AllocationEnv
from hrlsched.envs.base import SchedulingEnv
from hrlsched.envs.decision import DecisionPoint, InvalidActionError
from hrlsched.envs.flat import FlatEnv
from hrlsched.envs.hierarchical import HierarchicalEnv
from hrlsched.envs.placement import PlacementEnv
from hrlsched.envs.pool import WorkloadPool

__all__ = ["AllocationEnv", "DecisionPoint", "FlatEnv", "HierarchicalEnv", "InvalidActionError", "PlacementEnv", "SchedulingEnv",
           "WorkloadPool"]

for _name, _cls in (("Allocation-v0", "AllocationEnv"), ("Placement-v0", "PlacementEnv"),
                    ("Hierarchical-v0", "HierarchicalEnv"), ("Flat-v0", "FlatEnv")):
    if f"hrlsched/{_name}" not in gymnasium.registry:
        gymnasium.register(id=f"hrlsched/{_name}", entry_point=f"hrlsched.envs:{_cls}", disable_env_checker=True)
