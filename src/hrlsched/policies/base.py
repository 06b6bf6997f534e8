"""Scheduler interfaces.

A ``Scheduler`` (defined in ``hrlsched.contract``, re-exported here) reads a
``ClusterView`` and returns a ``Decision``. Most schedulers are an
``AllocationPolicy`` (level 1: how many workers and PSs each job gets, and in
which priority order) composed with a ``PlacementPolicy`` (level 2: which GPUs
and sockets), so any allocation runs with any placement; a joint policy (an RL
agent, Gandiva) implements ``Scheduler`` directly.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import (
    ARCHS,
    MODES,
    ClusterView,
    Decision,
    DecisionPoints,
    Scheduler,
    effective_job,
)
from hrlsched.core.placement import Placement

__all__ = ["Allocation", "AllocationPolicy", "ComposedScheduler", "PlacementPolicy", "Scheduler"]


@dataclass(frozen=True)
class Allocation:
    """Level-1 decision for one job. ``arch``/``mode``: a choice for a job that
    leaves its architecture / mode open (None: keep the current one)."""

    workers: int
    ps: int = 0
    batch_size: int | None = None
    arch: str | None = None
    mode: str | None = None


class AllocationPolicy(ABC):
    name: str = "allocation"
    event_driven: bool = False
    decision_points: DecisionPoints | None = None  # see contract.Scheduler
    decision_every: int = 1
    # Reads the true remaining work and the true performance model (see contract.Scheduler).
    oracle: bool = False
    # Decides on the predicted remaining work, the truth under an exact predictor (contract.Scheduler).
    reads_work: bool = False
    max_tasks_per_gpu: int = 1
    # The placement used when the command line names none (the paper's own).
    default_placement: str = "pack"
    # The allocation moves only at arrivals, completions and ``recheck_s``: composed with a
    # ``memoryless`` placement, the engine then asks only at those points (same decisions, fewer calls).
    recheck_driven: bool = False

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:  # noqa: B027
        pass

    @abstractmethod
    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        """Allocations of the jobs to run, in priority order (dict order)."""

    def priority(self, allocs: dict[int, Allocation]) -> list[int]:
        """The job ids of ``allocs`` (this policy's latest allocation) in the
        order the policy gave them resources: its dict order, unless the
        policy keeps another (``Optimus`` with ``first_order="remaining"``)."""
        return list(allocs)

    def recheck_s(self, view: ClusterView, placements: dict[int, Placement]) -> float | None:
        """For a ``recheck_driven`` policy: the earliest time at which its
        allocation may change with no arrival or completion, given the jobs
        that run (``placements``); None: not before the next event. Too early
        is harmless (the same decision again); too late is wrong."""
        return None


class PlacementPolicy(ABC):
    name: str = "placement"
    oracle: bool = False
    max_tasks_per_gpu: int = 1
    # Its placements depend only on the allocations, the jobs, the topology and the current
    # placements (not on time, progress, speeds or randomness): asked again with nothing
    # changed, it answers the same.
    memoryless: bool = False

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
        self.decision_points, self.decision_every = allocation.decision_points, allocation.decision_every
        # Asked only at events and at the allocation's recheck times: the same decisions as every round.
        self._recheck = allocation.recheck_driven and placement.memoryless and allocation.decision_points is None
        if self._recheck:
            self.decision_points = "events"
        self.oracle = allocation.oracle or placement.oracle
        self.reads_work = allocation.reads_work  # (no placement reads it)
        # Either part may time-share GPUs; the decision may then put that many workers on one.
        self.max_tasks_per_gpu = max(allocation.max_tasks_per_gpu, placement.max_tasks_per_gpu)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.allocation.reset(topology, rng)
        self.placement.reset(topology, rng)

    def decide(self, view: ClusterView) -> Decision:
        allocs = self.allocation.allocate(view)
        arch = {j: a.arch for j, a in allocs.items() if a.arch is not None}
        mode = {j: a.mode for j, a in allocs.items() if a.mode is not None}
        pview = _with_choices(view, arch, mode) if arch or mode else view
        placements = self.placement.place(pview, allocs)
        batch = {j: a.batch_size for j, a in allocs.items() if a.batch_size is not None and j in placements}
        recheck = self.allocation.recheck_s(view, placements) if self._recheck else None
        return Decision(placements=placements, batch_sizes=batch, arch=arch, mode=mode, recheck_s=recheck)


def _with_choices(view: ClusterView, arch: dict[int, str], mode: dict[int, str]) -> ClusterView:
    """The view with the allocation's architecture/mode choices applied to its
    jobs, so that the placement places PSs (or none) for the chosen architecture."""
    jobs = list(view.jobs)
    for jid in arch.keys() | mode.keys():
        k = view.index(jid)
        j = jobs[k]
        a, m = arch.get(jid, j.arch), mode.get(jid, j.mode)
        if a in ARCHS and m in MODES:  # a bad value is left for the engine to reject by name
            jobs[k] = effective_job(j, a, m)
    return dataclasses.replace(view, jobs=jobs, _index={})
