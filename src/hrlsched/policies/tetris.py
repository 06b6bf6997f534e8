"""Tetris (Grandl et al., "Multi-Resource Packing for Cluster Schedulers",
SIGCOMM'14), for GPU jobs.

Rules followed: a job's demand (GPUs, CPU cores, memory at its request) and
the free resources are normalised by the cluster's capacity; the packing
score is their dot product (alignment), which favours jobs that use the
resources that are plentiful; it is combined with shortest remaining work,
score = alignment + eps * srtf, where srtf = 1 / remaining time and eps
scales the second term to the first (eps = ``srtf_weight`` x mean alignment
/ mean srtf, the paper's knob). Jobs are packed greedily, highest score first,
re-scoring after each one, without preemption.
Departure: a job's remaining time uses the performance model's speed alone
at its request (an oracle, as Tetris' estimate from recurring jobs)."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import capacity, isolated_speeds, job_demand, requested


class Tetris(AllocationPolicy):
    name = "tetris"
    event_driven = True
    oracle = True  # remaining time from the true remaining work (see the docstring)
    reads_work = True
    default_placement = "pack"

    def __init__(self, srtf_weight: float = 1.0) -> None:
        self.srtf_weight = srtf_weight

    def scores(self, view: ClusterView, demand: np.ndarray, free: np.ndarray, rem_s: np.ndarray) -> np.ndarray:
        cap = capacity(view)
        align = (demand / cap) @ (free / cap)
        srtf = 1.0 / np.maximum(rem_s, 1e-9)
        eps = self.srtf_weight * align.mean() / max(srtf.mean(), 1e-12)
        return align + eps * srtf

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        cap = capacity(view)
        out: dict[int, Allocation] = {}
        free = cap.copy()
        demand = np.array([job_demand(view, k, j.requested_gpus, j.num_ps_requested) for k, j in enumerate(view.jobs)])
        for k, (job, pl) in enumerate(zip(view.jobs, view.placements)):
            if pl is not None:  # no preemption
                out[job.job_id] = requested(job)
                free -= demand[k]
        waiting = np.array([pl is None for pl in view.placements])
        if not waiting.any():
            return out
        rem = view.remaining / isolated_speeds(view)
        while True:
            fits = waiting & np.all(demand <= free + 1e-9, axis=1)
            if not fits.any():
                return out
            s = np.where(fits, self.scores(view, demand, free, rem), -np.inf)
            k = int(np.argmax(s))
            out[view.jobs[k].job_id] = requested(view.jobs[k])
            free -= demand[k]
            waiting[k] = False
