"""From trace records to simulated jobs, and trace statistics.

A trace gives arrivals, GPU counts and usually durations; a simulated
``Job`` also needs a model, an architecture, a batch size and its total work.

- Model. A record that names a model of the catalogue (or a known alias,
  ``MODEL_ALIASES``) keeps it, with its batch size when it has one.
  Otherwise one is assigned:
  ``buckets`` (default): by the job's GPU time, with the rule of the Pollux
  authors' workload generator (petuum/adaptdl osdi21-artifact,
  ``simulator/workload.py``): under 1 GPU-hour cifar10 or ncf, under 10
  deepspeech2 or bert (their generator turns half of its deepspeech2 jobs
  into bert), under 100 yolov3, above imagenet; the thresholds and model
  sets are configurable. Departure: their generator also redraws the GPU
  count of the two largest buckets; we keep the trace's.
  ``mix``: drawn from a configured {model: weight} mix.
  ``gpu_time``: the job's GPU-time quantile picks among the models sorted
  by iteration cost (heavy jobs run heavy models).
- Work. A job whose record has a duration gets the work it does in that
  duration alone at its requested GPUs, placed well
  (``PerformanceModel.isolated_speed``, as ``synthetic.work_for_duration``).
  A record without a duration naming a Pollux application (the Pollux
  workloads) gets the application's measured work to completion
  (``PolluxApplication.samples_to_complete``), so it needs the ``measured``
  backend. The builders get a ``core.sizing.WorkSizer`` (built by the
  scenario from the performance model), not the model itself.
- Architecture and mode. A record that states them (the generic format's
  ``arch``/``mode`` columns) keeps them; ``any`` leaves the choice to the
  scheduler (``Job.arch_open``/``mode_open``), with the default below.
  Otherwise: Pollux applications are all-reduce (as measured), other jobs
  all-reduce with probability ``allreduce_fraction``, else parameter server;
  sync. ``open_fraction`` of the jobs (drawn from a stream of their own, so
  the other draws do not move) also leave both open.
- Jobs asking for more GPUs than the cluster has are capped at its size or
  dropped (``oversize``); CPU-only records and records with neither a
  duration nor a measured application are dropped. ``ConversionReport``
  counts each case, and a warning says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.core.catalogue import DL2_MODELS, POLLUX_CATALOGUE
from hrlsched.core.job import Job
from hrlsched.core.sizing import WorkSizer
from hrlsched.data import WHERE, DataMissingError, data_dir, needs_data, resolve_path  # noqa: F401 - re-exported
from hrlsched.workload.loaders import LOADERS, load_trace  # noqa: F401 - re-exported
from hrlsched.workload.loaders.base import TraceRecord
from hrlsched.workload.synthetic import open_jobs

# Trace model names that are a catalogue model under another name.
MODEL_ALIASES: dict[str, str] = {
    "resnet50": "resnet-50",  # Tiresias
    "vgg16": "vgg-16",  # Tiresias
    "ResNet-50": "resnet-50",  # Gavel (ImageNet)
    "ResNet-18": "cifar10",  # Gavel's ResNet-18 on CIFAR-10 is Pollux's cifar10 application
    "LM": "wlm",  # Gavel's word-level language model (wikitext-2)
}

# (GPU-hours below which, models): the Pollux generator's buckets.
POLLUX_BUCKETS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (1.0, ("cifar10", "ncf")),
    (10.0, ("deepspeech2", "bert")),
    (100.0, ("yolov3",)),
    (float("inf"), ("imagenet",)),
)


@dataclass
class ConversionReport:
    records: int = 0
    jobs: int = 0
    capped: int = 0
    dropped_oversize: int = 0
    dropped_no_gpu: int = 0
    dropped_no_duration: int = 0
    models_assigned: dict[str, int] = field(default_factory=dict)

    def problems(self) -> str:
        parts = []
        if self.capped:
            parts.append(f"{self.capped} capped at the cluster's size")
        if self.dropped_oversize:
            parts.append(f"{self.dropped_oversize} dropped: larger than the cluster")
        if self.dropped_no_gpu:
            parts.append(f"{self.dropped_no_gpu} dropped: no GPU")
        if self.dropped_no_duration:
            parts.append(f"{self.dropped_no_duration} dropped: no duration and no measured application")
        return "; ".join(parts)


def select(records: Sequence[TraceRecord], start_s: float, end_s: float | None, sample: int | None,
           load_factor: float, rng: np.random.Generator) -> list[TraceRecord]:
    """The window [start, end) of trace time, a uniform sample of it (order
    kept), arrivals shifted to start at 0 (at ``start_s`` when given, else at
    the first arrival) and divided by ``load_factor`` (2: twice the arrival
    rate, the same jobs)."""
    recs = [r for r in records if r.arrival_s >= start_s and (end_s is None or r.arrival_s < end_s)]
    if sample is not None and sample < len(recs):
        keep = np.sort(rng.choice(len(recs), size=sample, replace=False))
        recs = [recs[i] for i in keep]
    if not recs:
        return []
    t0 = start_s if start_s > 0 else min(r.arrival_s for r in recs)
    return [replace(r, arrival_s=(r.arrival_s - t0) / load_factor) for r in recs]


def _bucket_model(gpu_h: float, buckets: Sequence[tuple[float, Sequence[str]]], rng: np.random.Generator) -> str:
    for below, models in buckets:
        if gpu_h < below:
            return models[int(rng.integers(len(models)))] if len(models) > 1 else models[0]
    models = buckets[-1][1]
    return models[int(rng.integers(len(models)))] if len(models) > 1 else models[0]


def to_jobs(
    records: Sequence[TraceRecord],
    sizer: WorkSizer,
    rng: np.random.Generator,
    *,
    models: list[str] | None = None,
    assignment: str = "buckets",
    buckets: Sequence[tuple[float, Sequence[str]]] | None = None,
    mix: Mapping[str, float] | None = None,
    allreduce_fraction: float = 0.4,
    open_fraction: float = 0.0,
    oversize: str = "cap",
    source: str = "trace",
    report: ConversionReport | None = None,
) -> list[Job]:
    """Simulated jobs of ``records`` (see the module docstring)."""
    cat = sizer.catalogue
    rep = report if report is not None else ConversionReport()
    rep.records = len(records)
    buckets = tuple(buckets) if buckets is not None else POLLUX_BUCKETS
    pool = list(models or DL2_MODELS)
    mix_models = list(mix or {})
    needed = set(pool) if assignment == "gpu_time" else set(mix_models) if assignment == "mix" else {
        m for _, ms in buckets for m in ms}
    if assignment not in ("buckets", "mix", "gpu_time"):
        raise ValueError(f"workload.model_assignment: expected buckets, mix or gpu_time, got {assignment!r}")
    if assignment == "mix" and not mix_models:
        raise ValueError("workload.mix: model_assignment 'mix' needs a {model: weight} mix")
    for m in sorted(needed):
        if m not in cat:
            raise ValueError(f"workload: model {m!r} is not in the catalogue; expected one of {sorted(cat)}")
    mix_p = np.array([float(mix[m]) for m in mix_models]) if mix else None  # type: ignore[index]
    if mix_p is not None:
        if (mix_p < 0).any() or mix_p.sum() <= 0:
            raise ValueError(f"workload.mix: expected non-negative weights with a positive sum, got {dict(mix or {})}")
        mix_p = mix_p / mix_p.sum()
    by_cost = sorted(pool, key=lambda m: cat[m].theta[0] * cat[m].default_batch + cat[m].theta[1])
    apps = sizer.measured_work
    g_max = sizer.n_gpus

    kept: list[TraceRecord] = []
    for r in records:
        if r.gpus < 1:
            rep.dropped_no_gpu += 1
            continue
        name = MODEL_ALIASES.get(r.model, r.model) if r.model else None
        if r.duration_s is None and name not in apps:
            rep.dropped_no_duration += 1
            continue
        if r.gpus > g_max:
            if oversize == "drop":
                rep.dropped_oversize += 1
                continue
            rep.capped += 1
            r = replace(r, gpus=g_max)
        kept.append(r)

    gpu_h = np.array([r.gpus * (r.duration_s or 0.0) / 3600.0 for r in kept])
    rank = np.argsort(np.argsort(gpu_h, kind="stable"), kind="stable") / max(len(kept), 1)
    is_open = open_jobs(len(kept), open_fraction, rng)
    jobs: list[Job] = []
    for i, r in enumerate(kept):
        known = MODEL_ALIASES.get(r.model, r.model) if r.model else None
        if known is not None and known in cat:
            model, batch = known, r.batch_size
        else:
            if assignment == "mix":
                model = mix_models[int(rng.choice(len(mix_models), p=mix_p))]
            elif assignment == "gpu_time":
                model = by_cost[min(int(rank[i] * len(by_cost)), len(by_cost) - 1)]
            else:
                model = _bucket_model(float(gpu_h[i]), buckets, rng)
            batch = None
            rep.models_assigned[model] = rep.models_assigned.get(model, 0) + 1
        prof = cat[model]
        # The Pollux applications were measured as all-reduce jobs.
        arch = "allreduce" if (model in POLLUX_CATALOGUE or rng.random() < allreduce_fraction) else "ps"
        mode = "sync"
        arch_open = mode_open = bool(is_open[i])
        if r.arch is not None:
            arch_open = arch_open or r.arch == "any"
            arch = arch if r.arch == "any" else r.arch
        if r.mode is not None:
            mode_open = mode_open or r.mode == "any"
            mode = mode if r.mode == "any" else r.mode
        if mode == "async" and arch == "allreduce":
            if r.arch == "allreduce":
                raise ValueError(f"{source}: job {r.name}: mode async with arch allreduce; asynchronous "
                                 "training needs arch ps (or any)")
            arch = "ps"  # asynchronous training needs a parameter server (perf.asynchrony)
        extra: dict[str, object] = {"trace": source}
        if r.model and r.model != model:
            extra["trace_model"] = r.model
        job = Job(job_id=len(jobs), arrival_s=float(r.arrival_s), model=model, total_samples=1.0,
                  batch_size=int(batch or prof.default_batch * r.gpus), requested_gpus=r.gpus, requested_ps=1,
                  arch=arch, mode=mode, arch_open=arch_open, mode_open=mode_open,  # type: ignore[arg-type]
                  user=r.user, name=r.name, trace_duration_s=r.duration_s, extra=extra)
        if r.duration_s is not None:
            total = sizer.work_for_duration(job, r.duration_s)
        else:
            total = apps[model](job.batch_size)
        jobs.append(replace(job, total_samples=float(total)))
    rep.jobs = len(jobs)
    if rep.problems():
        import logging  # (only here: a whole command pays for every import)

        logging.getLogger(__name__).warning("%s: %d of %d trace jobs kept; %s", source, rep.jobs, rep.records, rep.problems())
    return jobs


def build_trace_workload(cfg: Any, sizer: WorkSizer, rng: np.random.Generator,
                         report: ConversionReport | None = None) -> list[Job]:
    """The ``kind: trace`` workload of a scenario (``config.TraceWorkload``)."""
    path = resolve_path(cfg.path)
    if not path.exists():
        if needs_data(cfg.path):
            raise DataMissingError(f"workload.path: {path} not found. This scenario needs the public data folder: {WHERE}")
        raise ValueError(f"workload.path: {path}: no such file")
    options = {}
    if cfg.format == "gavel":
        options = {"throughputs": resolve_path(cfg.gavel_throughputs) if cfg.gavel_throughputs else None,
                   "worker_type": cfg.gavel_worker_type}
    records = load_trace(path, cfg.format, **options)
    end = cfg.window_end_s
    if end is None and cfg.window_h is not None:
        end = cfg.window_start_s + cfg.window_h * 3600.0
    recs = select(records, cfg.window_start_s, end, cfg.sample, cfg.load_factor, rng)
    if not recs:
        raise ValueError(f"workload: no job of {path} arrives in the window [{cfg.window_start_s}, {end}) s")
    return to_jobs(recs, sizer, rng, models=cfg.models, assignment=cfg.model_assignment, buckets=build_buckets(cfg.buckets),
                   mix=cfg.mix, allreduce_fraction=cfg.allreduce_fraction, open_fraction=cfg.open_fraction,
                   oversize=cfg.oversize,
                   source=str(path), report=report)


def build_buckets(buckets: Sequence[Any] | None) -> list[tuple[float, tuple[str, ...]]] | None:
    """``config.ModelBucket``s -> (GPU-hours bound, models); None: Pollux's."""
    if not buckets:
        return None
    return [(b.below_gpu_hours if b.below_gpu_hours is not None else float("inf"), tuple(b.models)) for b in buckets]


# ---------------------------------------------------------------- statistics

PERCENTILES = (10, 25, 50, 75, 90, 99)


def trace_stats(records: Sequence[TraceRecord], cluster_gpus: int | None = None,
                horizon_s: float | None = None) -> dict[str, Any]:
    """What ``hrlsched trace stats`` prints: jobs, GPU-count histogram,
    duration percentiles, inter-arrival coefficient of variation, GPU time and,
    given a cluster size, offered load = GPU-seconds asked / (GPUs x horizon),
    the horizon being the window's length when given, else the span of
    arrivals."""
    n = len(records)
    out: dict[str, Any] = {"jobs": n}
    if n == 0:
        return out
    arr = np.sort(np.array([r.arrival_s for r in records]))
    gpus = np.array([r.gpus for r in records])
    dur = np.array([r.duration_s for r in records if r.duration_s is not None], dtype=float)
    gsec = np.array([r.gpu_seconds for r in records])
    counts, freq = np.unique(gpus, return_counts=True)
    out["gpu_histogram"] = {int(c): int(f) for c, f in zip(counts, freq)}
    out["gpu_share_pct"] = {int(c): round(100.0 * f / n, 2) for c, f in zip(counts, freq)}
    out["mean_gpus"] = round(float(gpus.mean()), 3)
    out["jobs_with_duration"] = int(dur.size)
    if dur.size:
        out["duration_s"] = {f"p{p}": round(float(np.percentile(dur, p)), 1) for p in PERCENTILES}
        out["duration_s"]["mean"] = round(float(dur.mean()), 1)
    span = float(arr[-1] - arr[0])
    out["arrival_span_h"] = round(span / 3600.0, 3)
    gaps = np.diff(arr)
    if gaps.size > 1 and gaps.mean() > 0:
        out["interarrival_mean_s"] = round(float(gaps.mean()), 2)
        out["interarrival_cv"] = round(float(gaps.std() / gaps.mean()), 3)
    if dur.size:
        out["gpu_hours"] = round(float(gsec.sum()) / 3600.0, 1)
    if gsec.sum() > 0:
        out["gpu_time_share_8plus_pct"] = round(100.0 * float(gsec[gpus >= 8].sum() / gsec.sum()), 2)
    if cluster_gpus:
        out["cluster_gpus"] = int(cluster_gpus)
        out["jobs_larger_than_cluster"] = int((gpus > cluster_gpus).sum())
        h = horizon_s if horizon_s is not None else span
        if h > 0 and dur.size:
            out["offered_load"] = round(float(gsec.sum()) / (cluster_gpus * h), 4)
    return out


def stats_path(path: str | Path, fmt: str, cluster_gpus: int | None = None, **options: Any) -> dict[str, Any]:
    return trace_stats(load_trace(path, fmt, **options), cluster_gpus)
