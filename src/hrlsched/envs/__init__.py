"""Gymnasium environments of the scheduler: ``hrlsched/Allocation-v0``
(level 1), ``hrlsched/Placement-v0`` (level 2), ``hrlsched/Hierarchical-v0``
(both), registered on import of this package."""

from __future__ import annotations

import gymnasium

from hrlsched.envs.allocation import AllocationEnv
from hrlsched.envs.base import InvalidActionError, SchedulingEnv
from hrlsched.envs.hierarchical import HierarchicalEnv
from hrlsched.envs.placement import PlacementEnv
from hrlsched.envs.pool import WorkloadPool

__all__ = ["AllocationEnv", "HierarchicalEnv", "InvalidActionError", "PlacementEnv", "SchedulingEnv", "WorkloadPool"]

for _name, _cls in (("Allocation-v0", "AllocationEnv"), ("Placement-v0", "PlacementEnv"),
                    ("Hierarchical-v0", "HierarchicalEnv")):
    if f"hrlsched/{_name}" not in gymnasium.registry:
        gymnasium.register(id=f"hrlsched/{_name}", entry_point=f"hrlsched.envs:{_cls}", disable_env_checker=True)
