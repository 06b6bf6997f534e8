"""Small helpers shared by allocation policies."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation


def requested(job) -> Allocation:
    """The user's request: its GPUs, and one PS for a PS job."""
    return Allocation(job.requested_gpus, 1 if job.arch == "ps" else 0)


def isolated_speeds(view: ClusterView) -> np.ndarray:
    """Each active job's speed alone at its requested GPUs (samples/s)."""
    return np.array([view.perf.isolated_speed(j, j.requested_gpus, j.num_ps_requested, int(b))
                     for j, b in zip(view.jobs, view.batch_sizes)])


def greedy_by_order(view: ClusterView, order: np.ndarray) -> dict[int, Allocation]:
    """Requested allocations in ``order`` while GPUs last; a job that does not
    fit is skipped and later ones may start."""
    free = view.topology.n_gpus
    out: dict[int, Allocation] = {}
    for k in order:
        job = view.jobs[int(k)]
        if job.requested_gpus <= free:
            out[job.job_id] = requested(job)
            free -= job.requested_gpus
    return out


def job_demand(view: ClusterView, k: int, workers: int, ps: int) -> np.ndarray:
    """(GPUs, CPU cores, memory GiB) of job k at (workers, ps)."""
    prof = view.perf.profile(view.jobs[k])
    return np.array([workers, workers * prof.worker_cores + ps * prof.ps_cores,
                     workers * prof.worker_mem_gb + ps * prof.ps_mem_gb], dtype=float)


def capacity(view: ClusterView) -> np.ndarray:
    t = view.topology
    return np.array([t.n_gpus, t.server_cores.sum(), t.server_mem_gb.sum()], dtype=float)
