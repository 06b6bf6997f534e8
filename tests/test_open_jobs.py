"""Jobs that leave their architecture and mode to the scheduler: the
generator's ``open_fraction`` and the generic trace's arch/mode columns."""

from __future__ import annotations

import pytest

from hrlsched.config import resolve_run_config
from hrlsched.scenario import build_scenario
from hrlsched.workload.loaders import load_trace
from hrlsched.workload.loaders.base import TraceFormatError
from hrlsched.workload.trace import to_jobs


def _jobs(fraction: float, kind: str = "default", extra: list[str] | None = None):
    cfg = resolve_run_config(kind, overrides=[f"workload.open_fraction={fraction}", *(extra or [])])
    return build_scenario(cfg.scenario, 0)


@pytest.mark.parametrize("extra", [[], ["workload.async_fraction=0.2"]])
def test_open_fraction_moves_no_other_draw(extra: list[str]) -> None:
    closed, opened = _jobs(0.0, extra=extra).jobs, _jobs(0.5, extra=extra).jobs
    strip = [(j.arrival_s, j.model, j.total_samples, j.batch_size, j.requested_gpus, j.arch, j.mode, j.user)
             for j in closed]
    assert strip == [(j.arrival_s, j.model, j.total_samples, j.batch_size, j.requested_gpus, j.arch, j.mode, j.user)
                     for j in opened]
    assert not any(j.arch_open or j.mode_open for j in closed)
    share = sum(j.arch_open and j.mode_open for j in opened) / len(opened)
    assert 0.4 < share < 0.6
    assert all(not (j.mode == "async" and j.arch == "allreduce") for j in opened)


def test_default_scenario_leaves_a_share_open() -> None:
    jobs = build_scenario(resolve_run_config("default").scenario, 0).jobs
    share = sum(j.arch_open and j.mode_open for j in jobs) / len(jobs)
    assert 0.2 < share < 0.4


def test_generic_trace_arch_mode_columns(tmp_path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,gpus,duration_s,model,arch,mode\n0,2,600,vgg-16,any,any\n5,1,600,vgg-16,ps,async\n"
                 "9,4,600,vgg-16,allreduce,\n12,1,600,vgg-16,,\n")
    recs = load_trace(p, "generic")
    assert [(r.arch, r.mode) for r in recs] == [("any", "any"), ("ps", "async"), ("allreduce", None), (None, None)]
    built = _jobs(0.0, extra=["cluster.server_groups.0.count=2"])
    import numpy as np

    jobs = to_jobs(recs, built.perf.work_sizer(), np.random.default_rng(0), allreduce_fraction=0.0)
    assert (jobs[0].arch_open, jobs[0].mode_open, jobs[0].mode) == (True, True, "sync")
    assert (jobs[1].arch, jobs[1].mode, jobs[1].arch_open) == ("ps", "async", False)
    assert (jobs[2].arch, jobs[2].mode) == ("allreduce", "sync")
    assert not (jobs[3].arch_open or jobs[3].mode_open)


@pytest.mark.parametrize("row,field", [("0,1,600,vgg-16,ring,", "arch"), ("0,1,600,vgg-16,ps,fast", "mode"),
                                       ("0,1,600,vgg-16,allreduce,async", "mode")])
def test_generic_trace_bad_arch_mode(tmp_path, row: str, field: str) -> None:
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,gpus,duration_s,model,arch,mode\n" + row + "\n")
    with pytest.raises(TraceFormatError, match=rf"t.csv:2: field {field}"):
        load_trace(p, "generic")
