
"""The calibrated generator: sizes match their fitted distributions, arrival
processes have their stated shape (CV, diurnal ratio), the load knob hits
its target; trace and generated workloads become jobs of the right work."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hrlsched.config import resolve_run_config
from hrlsched.core import CATALOGUE
from hrlsched.perf import OptimusModel
from hrlsched.scenario import build_scenario
from hrlsched.workload.generator import (
    ITP_PROFILE,
    PHILLY_PROFILE,
    arrival_times,
    diurnal_rate,
    fit_profile,
    generate_records,
    mmpp_for_cv,
    offered_load,
)
from hrlsched.workload.loaders import TraceRecord, load_trace
from hrlsched.workload.trace import POLLUX_BUCKETS, ConversionReport, select, to_jobs


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("profile", [ITP_PROFILE, PHILLY_PROFILE], ids=lambda p: p.name)
def test_sizes_match_the_profile(profile) -> None:  # noqa: ANN001
    n = 40000
    g = profile.sample_gpus(n, rng(1))
    d = profile.sample_durations(g, rng(2))
    # GPU-count shares within 1 percentage point.
    for c, p in zip(profile.gpu_counts, profile.gpu_probs):
        assert np.mean(g == c) == pytest.approx(p, abs=0.01), c
    # Per class: the share of generated durations below the profile's p-quantile is p, within
    # 1.63/sqrt(n) (the Dvoretzky-Kiefer-Wolfowitz bound at 99%).
    cls = profile.classes(g)
    for c in range(4):
        dc = d[cls == c]
        if dc.size < 200:
            continue
        tol = 1.63 / np.sqrt(dc.size)
        for p in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
            assert np.mean(dc <= profile.quantile(c, p)) == pytest.approx(p, abs=tol), (c, p)
    assert d.min() >= profile.duration_quantiles[0][0] and d.max() <= max(q[-1] for q in profile.duration_quantiles if q)


def test_fit_recovers_a_generated_distribution() -> None:
    r = rng(3)
    g = r.choice([1, 2, 8], size=20000, p=[0.7, 0.2, 0.1])
    d = np.where(g >= 8, 5.0, 1.0) * np.exp(r.normal(8.0, 1.2, size=g.size))  # 8-GPU jobs 5x longer
    recs = [TraceRecord(f"j{i}", float(i), int(g[i]), float(d[i])) for i in range(g.size)]
    prof = fit_profile(recs, "test")
    assert prof.gpu_counts == (1, 2, 8) and prof.gpu_probs == pytest.approx((0.7, 0.2, 0.1), abs=0.01)
    assert prof.duration_quantiles[3] is None  # no job of 9+ GPUs
    assert prof.quantile(2, 0.5) / prof.quantile(0, 0.5) == pytest.approx(5.0, rel=0.1)
    # Resample from the fit: two-sample KS against the data.
    gs = prof.sample_gpus(20000, rng(4))
    ks = stats.ks_2samp(prof.sample_durations(gs, rng(5)), d)
    assert ks.statistic < 0.02, ks


def test_itp_profile_against_the_real_files(shared_data: Path) -> None:
    recs = [r for f in sorted((shared_data / "itp").glob("cluster*.csv")) for r in load_trace(f, "itp")]
    real = np.array([r.duration_s for r in recs])
    g = ITP_PROFILE.sample_gpus(len(recs), rng(6))
    ks = stats.ks_2samp(ITP_PROFILE.sample_durations(g, rng(7)), real)
    assert ks.statistic < 0.02, ks
    # The embedded constants are what the fit gives on these files.
    fitted = fit_profile(recs, "itp")
    assert fitted.gpu_probs == ITP_PROFILE.gpu_probs
    assert fitted.duration_quantiles == ITP_PROFILE.duration_quantiles


def test_philly_profile_against_the_real_file(shared_data: Path) -> None:
    recs = load_trace(shared_data / "pollux" / "traces" / "philly.csv", "philly")
    fitted = fit_profile(recs, "philly")
    assert fitted.gpu_probs == PHILLY_PROFILE.gpu_probs
    assert fitted.duration_quantiles == PHILLY_PROFILE.duration_quantiles


def cv(t: np.ndarray) -> float:
    gaps = np.diff(t)
    return float(gaps.std() / gaps.mean())


def test_poisson_arrivals() -> None:
    t = arrival_times("poisson", 50000, 1e6, rng(8))
    assert t.min() >= 0 and t.max() < 1e6 and np.all(np.diff(t) >= 0)
    assert cv(t) == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("target", [3.0, 8.0, 13.0])
def test_bursty_arrivals_reach_the_target_cv(target: float) -> None:
    m = mmpp_for_cv(target)
    assert m.interarrival_cv() == pytest.approx(target, rel=1e-6)
    assert m.mean_rate() == pytest.approx(1.0)
    t = arrival_times("bursty", 200000, 1e7, rng(9), target_cv=target)
    assert t.max() <= 1e7
    assert cv(t) == pytest.approx(target, rel=0.15)


def test_bursty_rejects_unreachable_cv() -> None:
    with pytest.raises(ValueError, match="target_cv: 9.0 is out of reach"):
        mmpp_for_cv(9.0, rate_ratio=10.0)
    with pytest.raises(ValueError, match="expected > 1"):
        mmpp_for_cv(0.5)


def test_diurnal_arrivals_follow_the_day_and_the_week() -> None:
    weeks = 4
    t = arrival_times("diurnal", 300000, weeks * 7 * 86400.0, rng(10), diurnal_ratio=9.0, weekend_factor=0.6)
    hours = (t / 3600.0).astype(int)
    per_hour = np.bincount(hours, minlength=weeks * 168).reshape(weeks * 7, 24)
    weekdays = per_hour[[d for d in range(weeks * 7) if d % 7 < 5]]
    weekend = per_hour[[d for d in range(weeks * 7) if d % 7 >= 5]]
    peak, trough = weekdays[:, 16].mean(), weekdays[:, 4].mean()
    assert peak / trough == pytest.approx(9.0, rel=0.1)
    assert weekend.sum(axis=1).mean() / weekdays.sum(axis=1).mean() == pytest.approx(0.6, rel=0.05)
    assert diurnal_rate(np.array([16 * 3600.0]), 9.0, 0.6)[0] == pytest.approx(9.0)


def test_replay_keeps_the_gap_sequence() -> None:
    src = np.cumsum(np.tile([1.0, 1.0, 10.0], 50))
    t = arrival_times("replay", 60, 1000.0, rng(11), replay_arrivals=src)
    gaps = np.diff(t)
    ratios = np.sort(np.unique(np.round(gaps / gaps.min(), 6)))
    assert list(ratios) == [1.0, 10.0]  # the original gaps, scaled


@pytest.mark.parametrize("process", ["poisson", "diurnal", "bursty"])
@pytest.mark.parametrize("load", [0.5, 1.2])
def test_load_knob_hits_the_target(process: str, load: float) -> None:
    n, gpus = 4000, 64
    recs = generate_records(n, ITP_PROFILE, rng(12), arrivals=process, cluster_gpus=gpus, load=load)
    t = np.array([r.arrival_s for r in recs])
    # Offered load over the arrival span (the window minus its last gap): within 5% of the target.
    assert offered_load(recs, gpus, float(t.max())) == pytest.approx(load, rel=0.05)
    assert max(r.gpus for r in recs) <= gpus
    # Twice the load, same jobs: half the window.
    twice = generate_records(n, ITP_PROFILE, rng(12), arrivals="poisson", cluster_gpus=gpus, load=2 * load)
    once = generate_records(n, ITP_PROFILE, rng(12), arrivals="poisson", cluster_gpus=gpus, load=load)
    assert max(r.arrival_s for r in twice) == pytest.approx(max(r.arrival_s for r in once) / 2, rel=1e-3)


def test_generator_caps_gpus_at_the_cluster() -> None:
    recs = generate_records(3000, ITP_PROFILE, rng(13), cluster_gpus=16, duration_h=10)
    assert max(r.gpus for r in recs) == 16 and max(r.arrival_s for r in recs) < 36000


# ------------------------------------------------------- records -> jobs


def test_to_jobs_sets_work_from_duration_and_assigns_pollux_buckets(perf: OptimusModel) -> None:
    recs = [TraceRecord("small", 0.0, 1, 600.0), TraceRecord("mid", 1.0, 2, 3 * 3600.0),
            TraceRecord("big", 2.0, 4, 20 * 3600.0), TraceRecord("huge", 3.0, 8, 20 * 3600.0)]
    jobs = to_jobs(recs, perf.work_sizer(), rng(14))
    assert jobs[0].model in POLLUX_BUCKETS[0][1] and jobs[1].model in POLLUX_BUCKETS[1][1]
    assert jobs[2].model == "yolov3" and jobs[3].model == "imagenet"  # 80 and 160 GPU-hours
    for j, r in zip(jobs, recs):
        alone = perf.isolated_speed(j, j.requested_gpus, j.num_ps_requested)
        assert j.total_samples / alone == pytest.approx(r.duration_s)
        assert j.requested_gpus == r.gpus and j.trace_duration_s == r.duration_s and j.arch == "allreduce"


def test_to_jobs_mix_known_models_and_aliases(perf: OptimusModel) -> None:
    recs = [TraceRecord(f"j{i}", float(i), 1, 1000.0) for i in range(2000)]
    jobs = to_jobs(recs, perf.work_sizer(), rng(15), assignment="mix", mix={"resnet-50": 3, "vgg-16": 1})
    share = np.mean([j.model == "resnet-50" for j in jobs])
    assert share == pytest.approx(0.75, abs=0.03)
    named = to_jobs([TraceRecord("t", 0.0, 2, 100.0, model="vgg16"), TraceRecord("u", 1.0, 1, 100.0, model="mystery")],
                    perf.work_sizer(), rng(16), assignment="mix", mix={"dssm": 1})
    assert named[0].model == "vgg-16" and named[0].batch_size == CATALOGUE["vgg-16"].default_batch * 2
    assert named[1].model == "dssm" and named[1].extra["trace_model"] == "mystery"


def test_to_jobs_oversize_and_report(perf: OptimusModel) -> None:
    n = perf.topology.n_gpus
    recs = [TraceRecord("ok", 0.0, 1, 100.0), TraceRecord("big", 1.0, n + 8, 100.0),
            TraceRecord("cpu", 2.0, 0, 100.0), TraceRecord("pending", 3.0, 1, None)]
    rep = ConversionReport()
    capped = to_jobs(recs, perf.work_sizer(), rng(17), report=rep)
    assert [j.requested_gpus for j in capped] == [1, n]
    assert (rep.capped, rep.dropped_no_gpu, rep.dropped_no_duration, rep.jobs, rep.records) == (1, 1, 1, 2, 4)
    rep = ConversionReport()
    dropped = to_jobs(recs, perf.work_sizer(), rng(17), oversize="drop", report=rep)
    assert [j.name for j in dropped] == ["ok"] and rep.dropped_oversize == 1


def test_select_window_sample_and_load_factor() -> None:
    recs = [TraceRecord(f"j{i}", 100.0 + 10 * i, 1, 50.0) for i in range(100)]
    w = select(recs, 200.0, 600.0, None, 1.0, rng(18))
    assert [r.name for r in w] == [f"j{i}" for i in range(10, 50)] and w[0].arrival_s == 0.0
    fast = select(recs, 200.0, 600.0, None, 2.0, rng(18))
    assert [r.arrival_s for r in fast] == [r.arrival_s / 2 for r in w]
    s = select(recs, 0.0, None, 30, 1.0, rng(18))
    assert len(s) == 30 and [r.arrival_s for r in s] == sorted(r.arrival_s for r in s) and s[0].arrival_s == 0.0


# ------------------------------------------------------- scenarios


def test_default_scenario_workload_is_unchanged() -> None:
    """The jobs of the default scenario (seed 0) are those the original
    synthetic generator (commit 6401c3f) made: arrivals, models, durations,
    sizes, kinds, batches, users. Floats are compared with a tolerance (the
    last bits of numpy's vectorised maths differ between CPUs, e.g. AVX-512)."""
    jobs = build_scenario(resolve_run_config("default").scenario, 0).jobs
    with open(Path(__file__).parent / "data" / "default_workload_seed0.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(jobs) == len(rows) == 200
    for j, r in zip(jobs, rows):
        assert (j.model, j.requested_gpus, j.arch, j.mode, j.batch_size, j.user) == (
            r["model"], int(r["requested_gpus"]), r["arch"], r["mode"], int(r["batch_size"]), r["user"])
        assert j.arrival_s == pytest.approx(float(r["arrival_s"]), rel=1e-9, abs=1e-5)
        assert j.trace_duration_s == pytest.approx(float(r["trace_duration_s"]), rel=1e-9, abs=1e-5)


@pytest.mark.parametrize("arrivals", ["poisson", "diurnal", "bursty"])
def test_generated_workload_kind(arrivals: str) -> None:
    wl = f'{{"kind": "generated", "jobs": 300, "arrivals": "{arrivals}", "load": 0.9, "sizes": "philly"}}'
    built = build_scenario(resolve_run_config("default", overrides=[f"workload={wl}"]).scenario, 3)
    assert len(built.jobs) == 300
    assert all(j.requested_gpus <= built.topology.n_gpus for j in built.jobs)
    again = build_scenario(resolve_run_config("default", overrides=[f"workload={wl}"]).scenario, 3)
    assert [(j.arrival_s, j.model, j.total_samples) for j in again.jobs] == [
        (j.arrival_s, j.model, j.total_samples) for j in built.jobs]


def test_trace_workload_kind_from_a_generic_file(tmp_path: Path) -> None:
    from hrlsched.workload.loaders import generic

    recs = generate_records(120, ITP_PROFILE, rng(19), cluster_gpus=64, duration_h=5)
    generic.dump(recs, tmp_path / "w.csv")
    wl = (f'{{"kind": "trace", "format": "generic", "path": "{tmp_path / "w.csv"}", "window_h": 2, '
          f'"load_factor": 2, "sample": 20}}')
    built = build_scenario(resolve_run_config("default", overrides=[f"workload={wl}"]).scenario, 0)
    in_window = [r for r in recs if r.arrival_s < 7200]
    assert len(built.jobs) == min(20, len(in_window))
    assert max(j.arrival_s for j in built.jobs) < 3600  # 2 h window, twice the rate


def test_itp_scenario_builds_from_the_real_file(shared_data: Path) -> None:
    built = build_scenario(resolve_run_config("itp-c01").scenario, 0)
    assert len(built.jobs) == 544  # docs/traces.md, hrlsched trace stats --window-h 168
    assert max(j.requested_gpus for j in built.jobs) == 64


def test_pollux_scenario_work_from_the_application(shared_data: Path) -> None:
    from hrlsched.perf.goodput import load_pollux_applications

    built = build_scenario(resolve_run_config("pollux-w1").scenario, 0)
    apps = load_pollux_applications(shared_data / "pollux" / "traces")
    assert len(built.jobs) == 160
    for j in built.jobs:
        assert j.total_samples == apps[j.model].samples_to_complete(j.batch_size)
        assert j.arch == "allreduce" and j.trace_duration_s is None


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ('{"kind": "trace", "format": "itp", "path": "x.csv", "window_start_s": 10, "window_end_s": 5}',
         "window_end_s: expected > window_start_s"),
        ('{"kind": "trace", "format": "csv", "path": "x.csv"}', "workload.format: expected one of"),
        ('{"kind": "trace", "format": "itp", "path": "x.csv", "model_assignment": "mix"}', "needs a {model: weight} mix"),
        ('{"kind": "generated", "load": null}', "give a target load or duration_h"),
        ('{"kind": "generated", "arrivals": "replay"}', "replay_path"),
        ('{"kind": "generated", "target_cv": 0.5}', "workload.target_cv: expected a value > 1"),
    ],
)
def test_workload_config_errors_name_the_field(workload: str, message: str) -> None:
    from hrlsched.config import ConfigError

    with pytest.raises(ConfigError) as e:
        resolve_run_config("default", overrides=[f"workload={workload}"])
    assert message in str(e.value), str(e.value)


def test_trace_workload_missing_file_and_empty_window(tmp_path: Path) -> None:
    from hrlsched.workload.loaders import generic

    wl = f'{{"kind": "trace", "format": "itp", "path": "{tmp_path / "none.csv"}"}}'
    with pytest.raises(ValueError, match="none.csv: no such file"):
        build_scenario(resolve_run_config("default", overrides=[f"workload={wl}"]).scenario, 0)
    generic.dump([TraceRecord("a", 5.0, 1, 10.0)], tmp_path / "g.csv")
    wl = f'{{"kind": "trace", "format": "generic", "path": "{tmp_path / "g.csv"}", "window_start_s": 100}}'
    with pytest.raises(ValueError, match="no job of .* arrives in the window"):
        build_scenario(resolve_run_config("default", overrides=[f"workload={wl}"]).scenario, 0)
