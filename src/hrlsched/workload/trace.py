"""From trace records to simulated jobs.

A trace gives arrivals, GPU counts and usually durations. A record that
names a Pollux application keeps it, with its batch size, and its work is
the application's measured work to completion. Otherwise a model is
assigned (``gpu_time``: the jobs' GPU-time quantile picks among the models
ordered by iteration cost, so heavy jobs run heavy models, in the spirit of
the Pollux authors' workload generator; ``uniform``: at random), and the work
is set so that the job alone at its requested GPUs, placed well, runs for its
trace duration.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hrlsched.perf.base import PerformanceModel
from hrlsched.workload.catalogue import DL2_MODELS
from hrlsched.workload.job import Job
from hrlsched.workload.loaders import generic, itp, philly, pollux
from hrlsched.workload.loaders.base import TraceRecord

LOADERS: dict[str, Callable[[str | Path], list[TraceRecord]]] = {
    "pollux": pollux.load,
    "itp": itp.load,
    "philly": philly.load,
    "generic": generic.load,
}


def data_dir() -> Path:
    """``$HRLSCHED_DATA``, else ``../shared/data`` from the working directory
    or from the repository."""
    env = os.environ.get("HRLSCHED_DATA")
    if env:
        return Path(env)
    for cand in (Path.cwd().parent / "shared" / "data", Path(__file__).resolve().parents[3].parent / "shared" / "data"):
        if cand.is_dir():
            return cand
    return Path.cwd().parent / "shared" / "data"


def resolve_path(path: str) -> Path:
    return Path(path.replace("${data}", str(data_dir())))


def load_trace(path: str | Path, fmt: str) -> list[TraceRecord]:
    try:
        loader = LOADERS[fmt]
    except KeyError:
        raise ValueError(f"workload.format: unknown trace format {fmt!r}; expected one of {sorted(LOADERS)}") from None
    return loader(path)


def select(records: list[TraceRecord], start_s: float, end_s: float | None, sample: int | None,
           load_factor: float, rng: np.random.Generator) -> list[TraceRecord]:
    """The window [start, end), a uniform sample of it, arrivals from 0 and
    compressed by ``load_factor`` (2 = twice the arrival rate)."""
    recs = [r for r in records if r.arrival_s >= start_s and (end_s is None or r.arrival_s < end_s)]
    if sample is not None and sample < len(recs):
        keep = np.sort(rng.choice(len(recs), size=sample, replace=False))
        recs = [recs[i] for i in keep]
    if not recs:
        return []
    t0 = start_s if start_s > 0 else min(r.arrival_s for r in recs)
    return [TraceRecord(r.name, (r.arrival_s - t0) / load_factor, r.gpus, r.duration_s, r.model, r.batch_size, r.user)
            for r in recs]


def to_jobs(records: list[TraceRecord], perf: PerformanceModel, rng: np.random.Generator, *,
            models: list[str] | None = None, assignment: str = "gpu_time", allreduce_fraction: float = 0.4,
            oversize: str = "cap", source: str = "trace") -> list[Job]:
    cat = perf.catalogue
    pool = list(models or DL2_MODELS)
    for m in pool:
        if m not in cat:
            raise ValueError(f"workload.models: {m!r} is not in the catalogue")
    by_cost = sorted(pool, key=lambda m: cat[m].theta[0] * cat[m].default_batch + cat[m].theta[1])
    g_max = perf.topology.n_gpus
    recs = []
    for r in records:
        if r.gpus > g_max:
            if oversize == "drop":
                continue
            r = TraceRecord(r.name, r.arrival_s, g_max, r.duration_s, r.model, r.batch_size, r.user)
        recs.append(r)
    gpu_time = np.array([r.gpus * (r.duration_s or 0.0) for r in recs])
    rank = np.argsort(np.argsort(gpu_time, kind="stable"), kind="stable") / max(len(recs), 1)
    apps = getattr(perf, "apps", {})
    jobs: list[Job] = []
    for i, r in enumerate(recs):
        if r.model is not None and r.model in cat:
            model = r.model
        elif assignment == "uniform":
            model = pool[int(rng.integers(len(pool)))]
        else:
            model = by_cost[min(int(rank[i] * len(by_cost)), len(by_cost) - 1)]
        prof = cat[model]
        arch = "allreduce" if (model in apps or rng.random() < allreduce_fraction) else "ps"
        job = Job(job_id=i, arrival_s=float(r.arrival_s), model=model, total_samples=1.0,
                  batch_size=r.batch_size or prof.default_batch * r.gpus, requested_gpus=r.gpus, requested_ps=1,
                  arch=arch, user=r.user, name=r.name, trace_duration_s=r.duration_s)  # type: ignore[arg-type]
        if model in apps:
            total = apps[model].samples_to_complete(job.batch_size)
        elif r.duration_s is not None:
            total = r.duration_s * perf.isolated_speed(job, job.requested_gpus, job.num_ps_requested)
        else:
            raise ValueError(f"{source}: job {r.name!r} has neither a duration nor a measured application")
        jobs.append(Job(**{**job.__dict__, "total_samples": float(total)}))
    return jobs
