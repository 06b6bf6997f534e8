"""The synthetic workload of built-in scenarios: Poisson arrivals (or, with
``arrivals``, diurnal or bursty ones over the same window: the same jobs at
the same offered load, ``workload.generator.arrival_times``), GPU counts
from a categorical distribution, log-normal (heavy-tailed) durations, models
drawn from the catalogue. A job's work is set so that, alone at its requested
GPUs and placed well, it runs for its drawn duration.

``open_fraction`` of the jobs leave their architecture and mode to the
scheduler (``Job.arch_open``/``mode_open``); they keep the drawn arch and
mode as their default. Which jobs are open is drawn from a stream of its
own (``open_jobs``), so the other draws, and thus the jobs of a workload
without open jobs, do not move."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from hrlsched.core.catalogue import DL2_MODELS
from hrlsched.core.job import Job
from hrlsched.core.sizing import WorkSizer
from hrlsched.workload.generator import arrival_times

if TYPE_CHECKING:
    from hrlsched.config import SyntheticWorkload


def open_jobs(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Which of ``n`` jobs leave arch and mode open, each with probability
    ``fraction``, drawn from a child stream of ``rng`` (spawning does not
    advance ``rng``, so the caller's other draws stay as they were)."""
    if fraction <= 0:
        return np.zeros(n, dtype=bool)
    return rng.spawn(1)[0].random(n) < fraction


def generate_synthetic(cfg: SyntheticWorkload, sizer: WorkSizer, rng: np.random.Generator) -> list[Job]:
    models = cfg.models or list(DL2_MODELS)
    for m in models:
        if m not in sizer.catalogue:
            raise ValueError(f"workload.models: {m!r} is not in the catalogue; expected one of {sorted(sizer.catalogue)}")
    n = cfg.jobs
    max_gpus = sizer.n_gpus
    arrivals = np.sort(rng.uniform(0.0, cfg.duration_h * 3600.0, size=n))  # Poisson given n
    drawn = rng.choice(np.asarray(cfg.gpu_counts), size=n, p=np.asarray(cfg.gpu_probs))
    over = int(np.count_nonzero(drawn > max_gpus))
    if over:  # capped, not refused: a scenario stays usable on a smaller cluster; said once
        warnings.warn(
            f"workload.gpu_counts: {over} of {n} jobs asked for more than the cluster's {max_gpus} GPUs "
            f"(up to {int(drawn.max())}); capped at {max_gpus}",
            stacklevel=2,
        )
    gpus = np.minimum(drawn, max_gpus)
    dur = np.clip(
        cfg.duration_median_s * np.exp(cfg.duration_sigma * rng.standard_normal(n)),
        cfg.duration_min_s,
        cfg.duration_max_s,
    )
    model_idx = rng.integers(0, len(models), size=n)
    allreduce = rng.random(n) < cfg.allreduce_fraction
    asyn = rng.random(n) < cfg.async_fraction
    users = rng.integers(0, cfg.users, size=n)
    is_open = open_jobs(n, cfg.open_fraction, rng)
    if cfg.arrivals != "poisson":
        # The same jobs as under Poisson (every draw above made as it was), arriving by the process,
        # from a stream of its own spawned after open_jobs' (spawning advances no draw).
        arrivals = arrival_times(cfg.arrivals, n, cfg.duration_h * 3600.0, rng.spawn(1)[0],
                                 diurnal_ratio=cfg.diurnal_ratio, start_hour=cfg.start_hour, target_cv=cfg.target_cv)
    jobs = []
    for i in range(n):
        model = models[model_idx[i]]
        prof = sizer.catalogue[model]
        # Asynchronous training needs a parameter server (perf.asynchrony).
        arch = "allreduce" if allreduce[i] and not asyn[i] else "ps"
        probe = Job(
            job_id=i,
            arrival_s=float(round(arrivals[i], 3)),
            model=model,
            total_samples=1.0,
            batch_size=prof.default_batch * (int(gpus[i]) if not asyn[i] else 1),
            requested_gpus=int(gpus[i]),
            requested_ps=1,
            arch=arch,
            mode="async" if asyn[i] else "sync",
            arch_open=bool(is_open[i]),
            mode_open=bool(is_open[i]),
            user=f"user{users[i]}",
        )
        total = sizer.work_for_duration(probe, float(dur[i]))
        jobs.append(
            Job(**{**probe.__dict__, "total_samples": total, "trace_duration_s": float(dur[i]), "name": ""})
        )
    return jobs
