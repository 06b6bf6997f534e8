"""The Optimus speed function with a placement-agnostic network.

Optimus (Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for
Deep Learning Clusters", EuroSys'18, Sec. 3.2) models the time of one
iteration of a parameter-server job with w workers and p PSs as

    t(w, p) = theta0 * M / w + theta1 + theta2 * w / p + theta3 * w + theta4 * p

(M: global batch). Synchronous: speed = M / t samples/s, paced by the
slowest GPU. Asynchronous (the paper's asynchronous form, parameter server
only): each worker runs its own mini-batch m = ``batch_size`` and pushes on
its own, with no barrier, so each worker i goes at its own pace and the
job's speed is the sum over its workers,
speed = sum_i m / (theta0 * m * k_i / g_i + theta1 + theta2 * w / p + theta3 * w + theta4 * p)
(g_i: the model's speed on worker i's GPU type, ``Topology.type_speed``, k_i: tasks time-sharing its GPU; the PS term
theta2 w / p still counts all w workers); on equal GPUs it is Optimus'
w * m / t. Staleness costs statistical efficiency (``perf.asynchrony``,
``perf.options.staleness_penalty``); async all-reduce is refused.

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
from hrlsched.perf.asynchrony import refuse_async_allreduce
from hrlsched.perf.base import (
    PerformanceModel,
    gpu_share_counts,
    per_job_max,
    theta_speed_ceiling,
)


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
        return self._solve(jobs, placements, batch_sizes, isolated=False)

    def speed_ceiling(self, job: Job, n_workers: np.ndarray) -> np.ndarray:
        return theta_speed_ceiling(job, self.profile(job), n_workers, float(self.topology.type_speed(job.model).max()))

    def isolated_speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each (job, placement) alone: no GPU time-shared with another job."""
        return self._solve(jobs, placements, batch_sizes, isolated=True)

    def _solve(
        self, jobs: Sequence[Job], placements: Sequence[Placement], batch_sizes: np.ndarray | None, isolated: bool
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
        if not sync.all():
            refuse_async_allreduce(jobs, self.name)
        p = np.where(allreduce, w, np.maximum(ps, 1.0))
        # Time-shared GPUs: each task gets 1/k of the GPU; the slowest GPU sets the pace.
        # A job's own workers are on distinct GPUs: alone, no GPU is shared.
        counts = np.ones(topo.n_gpus) if isolated else gpu_share_counts(placements, topo.n_gpus).astype(float)
        share = per_job_max(counts, placements)
        # The model's speed on each GPU type (Topology.type_speed); the slowest worker paces.
        tspeed = topo.type_speeds([j.model for j in jobs])
        lens = np.fromiter((len(pl.gpus) for pl in placements), dtype=np.int64, count=n)
        flat = np.fromiter((x for pl in placements for x in pl.gpus), dtype=np.int64, count=int(lens.sum()))
        slowest = np.minimum.reduceat(tspeed[np.repeat(np.arange(n), lens), topo.gpu_type[flat]],
                                      np.concatenate([[0], np.cumsum(lens)[:-1]]))
        compute_scale = share / slowest
        scaled = theta.copy()
        scaled[:, 0] *= compute_scale
        out = optimus_speed(scaled, batch, w, p, sync)
        if sync.all():
            return out
        # Async: no barrier, each worker at its own GPU's pace.
        a = np.flatnonzero(~sync)
        wa = w[a].astype(np.int64)
        g = np.fromiter((x for i in a for x in placements[i].gpus), dtype=np.int64, count=int(wa.sum()))
        wj = np.repeat(np.arange(a.size), wa)
        th, m = theta[a][wj], batch[a][wj]
        t_i = th[:, 0] * m * counts[g] / tspeed[a][wj, topo.gpu_type[g]] + th[:, 1] + th[:, 2] * wa[wj] / p[a][wj] \
            + th[:, 3] * wa[wj] + th[:, 4] * p[a][wj]
        out[a] = np.bincount(wj, weights=m / t_i, minlength=a.size)
        return out
