"""The Optimus speed function with a placement-agnostic network.

Optimus (Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for
Deep Learning Clusters", EuroSys'18, Sec. 3.2) models the time of one
iteration of a parameter-server job with w workers and p PSs as

    t(w, p) = theta0 * M / w + theta1 + theta2 * w / p + theta3 * w + theta4 * p

(M: global batch). Synchronous: speed = M / t samples/s. Asynchronous: each
worker runs its own mini-batch m = ``batch_size`` and pushes on its own, so
speed = w * m / (theta0 * m + theta1 + theta2 * w / p + theta3 * w + theta4 * p).

Where this backend departs from a real cluster, on purpose: the network is
uniform (placement only matters through the GPU type, the slowest GPU of a
job sets its compute pace, and GPU time-sharing), and an all-reduce job is
modelled with p = w (a ring moves the same 2(w-1)/w model bytes per worker
as a PS design with one shard per worker). The topology-aware backend is
``hrlsched.perf.analytic``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel, gpu_share_counts, per_job_max, per_job_min


def optimus_iteration_time(
    theta: np.ndarray, batch: np.ndarray, w: np.ndarray, p: np.ndarray, sync: np.ndarray | bool = True
) -> np.ndarray:
    """Seconds per iteration; ``theta`` has shape (n, 5) or (5,). Sync:
    ``batch`` is the global batch; async: each worker's batch."""
    theta = np.atleast_2d(theta)
    w = np.asarray(w, dtype=float)
    p = np.asarray(p, dtype=float)
    batch = np.asarray(batch, dtype=float)
    local = np.where(sync, batch / w, batch)
    return theta[:, 0] * local + theta[:, 1] + theta[:, 2] * w / p + theta[:, 3] * w + theta[:, 4] * p


def optimus_speed(
    theta: np.ndarray, batch: np.ndarray, w: np.ndarray, p: np.ndarray, sync: np.ndarray | bool = True
) -> np.ndarray:
    """Samples per second (Optimus f(w, p) times the samples of one iteration)."""
    t = optimus_iteration_time(theta, batch, w, p, sync)
    w = np.asarray(w, dtype=float)
    batch = np.asarray(batch, dtype=float)
    return np.where(sync, batch, w * batch) / t


class OptimusModel(PerformanceModel):
    name = "optimus"

    def speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        n = len(jobs)
        if n == 0:
            return np.zeros(0)
        topo = self.topology
        batch = np.array([j.batch_size for j in jobs], float) if batch_sizes is None else np.asarray(batch_sizes, float)
        theta = np.array([self.profile(j).theta for j in jobs], dtype=float)
        w = np.fromiter((p.n_workers for p in placements), dtype=float, count=n)
        ps = np.fromiter((p.n_ps for p in placements), dtype=float, count=n)
        allreduce = np.array([j.arch == "allreduce" for j in jobs])
        sync = np.array([j.mode == "sync" for j in jobs])
        p = np.where(allreduce, w, np.maximum(ps, 1.0))
        # Time-shared GPUs: each task gets 1/k of the GPU; the slowest GPU sets the pace.
        share = per_job_max(gpu_share_counts(placements, topo.n_gpus).astype(float), placements)
        slowest = per_job_min(topo.gpu_speed, placements)
        compute_scale = share / slowest
        scaled = theta.copy()
        scaled[:, 0] *= compute_scale
        return optimus_speed(scaled, batch, w, p, sync)
