"""Shortest remaining time first (preemptive), at the requested GPUs.

The classic size-based baseline used in DL scheduling papers (e.g. Tiresias,
NSDI'19, and Gandiva/Themis comparisons): each round jobs are ordered by
remaining time and started greedily; a job that does not fit is skipped.
``srtf`` uses the true remaining time (an oracle: remaining work / speed alone
at the request); ``srtf-est`` uses a user estimate: the job's true total time
times a per-job log-normal error (sigma ``error_sigma``, drawn from the run's
seed), less the time it has run, as users mis-estimate durations by factors
(Tiresias, Sec. 2.2)."""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import greedy_by_order, isolated_speeds


class SRTF(AllocationPolicy):
    name = "srtf"
    event_driven = True  # remaining times only shrink for running jobs: order changes on arrivals
    default_placement = "pack"

    def __init__(self, estimate: bool = False, error_sigma: float = 0.7) -> None:
        self.estimate = estimate
        self.error_sigma = error_sigma
        self.oracle = not estimate  # srtf reads the true remaining work; srtf-est the predictor's
        # srtf-est: the predictor's total work times its own users' error, an estimate even where exact
        self.reads_work = not estimate
        if estimate:
            self.name = "srtf-est"

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.seed = int(rng.integers(2**31))
        self.factor: dict[int, float] = {}

    def remaining_s(self, view: ClusterView) -> np.ndarray:
        speed = isolated_speeds(view)
        if not self.estimate:
            return view.remaining / speed
        total = (view.progress + view.remaining) / speed
        f = np.array([self.factor.setdefault(j.job_id, float(np.exp(
            self.error_sigma * np.random.default_rng([self.seed, j.job_id]).standard_normal()))) for j in view.jobs])
        return np.maximum(total * f - view.progress / speed, 0.0)

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        rem = self.remaining_s(view)
        order = np.lexsort((view.job_ids, rem))
        return greedy_by_order(view, order)
