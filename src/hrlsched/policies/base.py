"""Scheduler interfaces.

A ``Scheduler`` reads a ``ClusterView`` and returns a ``Decision``. Most
schedulers are an ``AllocationPolicy`` (level 1: how many workers and PSs each
job gets, and in which priority order) composed with a ``PlacementPolicy``
(level 2: which GPUs and sockets), so any allocation runs with any placement;
a joint policy (an RL agent, Gandiva) implements ``Scheduler`` directly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.placement import Placement


@dataclass(frozen=True)
class Allocation:
    """Level-1 decision for one job."""

    workers: int
    ps: int = 0
    batch_size: int | None = None


class Scheduler(ABC):
    name: str = "scheduler"
    # True when decisions only change on arrivals and completions: the engine
    # then calls the scheduler only at rounds where one happened.
    event_driven: bool = False
    # Most workers (of any jobs) a decision may put on one GPU (time-slicing).
    max_tasks_per_gpu: int = 1

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:  # noqa: B027
        """Called once before a run."""

    @abstractmethod
    def decide(self, view: ClusterView) -> Decision: ...


class AllocationPolicy(ABC):
    name: str = "allocation"
    event_driven: bool = False
    # The placement used when the command line names none (the paper's own).
    default_placement: str = "pack"

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:  # noqa: B027
        pass

    @abstractmethod
    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        """Allocations of the jobs to run, in priority order (dict order)."""


class PlacementPolicy(ABC):
    name: str = "placement"

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:  # noqa: B027
        pass

    @abstractmethod
    def place(self, view: ClusterView, allocations: dict[int, Allocation]) -> dict[int, Placement]:
        """Placements for as many of ``allocations`` as fit, honouring their order."""


class ComposedScheduler(Scheduler):
    def __init__(self, allocation: AllocationPolicy, placement: PlacementPolicy) -> None:
        self.allocation = allocation
        self.placement = placement
        self.name = f"{allocation.name}+{placement.name}"
        self.event_driven = allocation.event_driven

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.allocation.reset(topology, rng)
        self.placement.reset(topology, rng)

    def decide(self, view: ClusterView) -> Decision:
        allocs = self.allocation.allocate(view)
        placements = self.placement.place(view, allocs)
        batch = {j: a.batch_size for j, a in allocs.items() if a.batch_size is not None and j in placements}
        return Decision(placements=placements, batch_sizes=batch)
