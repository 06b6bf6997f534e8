"""Per-job rows and the run summary, from a finished simulation."""

from __future__ import annotations

import math

import numpy as np

from hrlsched.sim.engine import SimResult

JOB_COLUMNS = [
    "job_id", "model", "arrival_s", "start_s", "finish_s", "jct_s", "queue_s", "restarts",
    "gpu_seconds", "mean_workers", "mean_ps", "mean_slowdown",
]
ROUND_COLUMNS = ["time_s", "gpus_busy", "jobs_queued", "jobs_running", "mean_slowdown"]


def job_table(res: SimResult) -> dict[str, np.ndarray]:
    """Columns of jobs.csv. ``queue_s`` is all the time a job spent without
    resources (before its first start and while preempted); ``mean_slowdown``
    is its speed alone at the same placement over its speed with neighbours,
    averaged over the time it ran."""
    arrival = np.array([j.arrival_s for j in res.jobs])
    jct = res.finish_s - arrival
    held = np.where(res.hold_s > 0, res.hold_s, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "job_id": np.array([j.job_id for j in res.jobs]),
            "model": np.array([j.model for j in res.jobs], dtype=object),
            "arrival_s": arrival,
            "start_s": res.start_s,
            "finish_s": res.finish_s,
            "jct_s": jct,
            "queue_s": jct - res.hold_s,
            "restarts": res.restarts,
            "gpu_seconds": res.gpu_seconds,
            "mean_workers": res.worker_seconds / held,
            "mean_ps": res.ps_seconds / held,
            "mean_slowdown": res.slowdown_seconds / held,
        }


def percentile(x: np.ndarray, p: float) -> float:
    """``np.percentile(x, p)`` (its default "linear" method) of a 1-D array
    without NaN, to the bit: the same virtual index and interpolation.
    np.percentile itself goes through np.unique, whose first call imports
    numpy.ma (~15 ms of a whole ``simulate``)."""
    a = np.sort(np.asarray(x, dtype=float))
    n = a.size
    vi = (n - 1) * (p / 100)
    if vi >= n - 1:
        return float(a[-1])
    if vi < 0:
        return float(a[0])
    lo = math.floor(vi)
    gamma = vi - lo
    lo_v, hi_v = float(a[lo]), float(a[lo + 1])
    d = hi_v - lo_v
    return hi_v - d * (1 - gamma) if gamma >= 0.5 else lo_v + d * gamma


def finish_time_fairness(res: SimResult) -> np.ndarray:
    """Themis' finish-time fairness rho = T_shared / T_ideal per completed job
    (Mahajan et al., NSDI'20), with T_ideal = T_alone x N_avg: the job's
    duration alone at its requested GPUs times the average number of jobs
    contending (active) during its life."""
    arrival = np.array([j.arrival_s for j in res.jobs])
    jct = res.finish_s - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        n_avg = np.maximum(res.contention_seconds / jct, 1.0)
        return jct / (res.isolated_duration_s * n_avg)


def summary(res: SimResult, policy: str, scenario: str) -> dict[str, object]:
    t = job_table(res)
    done = ~np.isnan(t["finish_s"])
    jct = t["jct_s"][done]
    r = res.rounds
    end = np.nanmax(res.finish_s) if done.any() else res.end_time_s
    in_run = r["time_s"] < end
    util = r["gpus_busy"][in_run] / res.n_gpus
    ftf = finish_time_fairness(res)[done]

    def q(x: np.ndarray, p: float) -> float | None:
        return percentile(x, p) if x.size else None

    first = float(min(j.arrival_s for j in res.jobs)) if res.jobs else 0.0
    last = float(max(j.arrival_s for j in res.jobs)) if res.jobs else 0.0
    # Offered load: GPU-hours the jobs ask for (requested GPUs x their time
    # alone there) over the cluster's GPU-hours while jobs arrive. It counts
    # demand; gpu_util_mean counts GPUs busy over the whole makespan.
    asked = float(sum(j.requested_gpus * d for j, d in zip(res.jobs, res.isolated_duration_s)))
    offered = asked / (res.n_gpus * (last - first)) if last > first else None
    return {
        "policy": policy,
        "scenario": scenario,
        "jobs_total": len(res.jobs),
        "jobs_completed": int(done.sum()),
        "avg_jct_s": float(jct.mean()) if jct.size else None,
        "p50_jct_s": q(jct, 50),
        "p95_jct_s": q(jct, 95),
        "p99_jct_s": q(jct, 99),
        "makespan_s": float(end - first) if done.any() else None,
        "gpu_util_mean": float(util.mean()) if util.size else 0.0,
        "offered_load": offered,
        "avg_queue_s": float(t["queue_s"][done].mean()) if done.any() else None,
        "max_ftf": float(ftf.max()) if ftf.size else None,
        "restarts_total": int(res.restarts.sum()),
        "rounds": int(r["time_s"].size),
    }
