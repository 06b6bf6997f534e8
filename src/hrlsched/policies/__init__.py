"""Schedulers: allocation (level 1) and placement (level 2) policies."""

from hrlsched.policies.base import (
    Allocation,
    AllocationPolicy,
    ComposedScheduler,
    PlacementPolicy,
    Scheduler,
)
from hrlsched.policies.registry import all_policies, make_scheduler, register

__all__ = [
    "Allocation",
    "AllocationPolicy",
    "ComposedScheduler",
    "PlacementPolicy",
    "Scheduler",
    "all_policies",
    "make_scheduler",
    "register",
]
