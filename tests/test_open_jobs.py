"""Jobs that leave arch and mode to the scheduler: the generator's share, the
trace columns, and the jobs that do not move."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hrlsched.cluster import Topology
from hrlsched.config import SyntheticWorkload
from hrlsched.core import CATALOGUE
from hrlsched.perf.optimus import OptimusModel
from hrlsched.workload.loaders import generic
from hrlsched.workload.loaders.base import TraceFormatError, TraceRecord
from hrlsched.workload.synthetic import generate_synthetic
from hrlsched.workload.trace import to_jobs
from tests.conftest import small_spec

SIZER = OptimusModel(Topology.from_spec(small_spec()), CATALOGUE).work_sizer()


def closed(jobs):
    return [replace(j, arch_open=False, mode_open=False) for j in jobs]


def test_open_fraction_share_and_other_draws_unchanged() -> None:
    base = generate_synthetic(SyntheticWorkload(jobs=3000), SIZER, np.random.default_rng(7))
    opened = generate_synthetic(SyntheticWorkload(jobs=3000, open_fraction=0.3), SIZER, np.random.default_rng(7))
    share = np.mean([j.arch_open for j in opened])
    assert share == pytest.approx(0.3, abs=0.03)
    assert all(j.arch_open == j.mode_open for j in opened)
    assert not any(j.arch_open or j.mode_open for j in base)
    assert closed(opened) == base  # same arrivals, models, sizes, work, default arch and mode


def test_trace_conversion_open_fraction_keeps_the_other_draws() -> None:
    recs = [TraceRecord(f"r{i}", float(i), 1 + i % 4, 300.0 + i) for i in range(400)]
    a = to_jobs(recs, SIZER, np.random.default_rng(3))
    b = to_jobs(recs, SIZER, np.random.default_rng(3), open_fraction=0.5)
    assert closed(b) == a
    assert np.mean([j.arch_open for j in b]) == pytest.approx(0.5, abs=0.08)


def test_generic_arch_mode_columns(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,gpus,duration_s,model,arch,mode\n0,2,100,vgg-16,any,any\n1,1,50,dssm,ps,async\n"
                    "2,1,50,dssm,,\n")
    recs = generic.load(path)
    assert [(r.arch, r.mode) for r in recs] == [("any", "any"), ("ps", "async"), (None, None)]
    assert generic.load(generic.dump(recs, tmp_path / "u.csv") or tmp_path / "u.csv") == recs
    jobs = to_jobs(recs, SIZER, np.random.default_rng(0))
    assert jobs[0].arch_open and jobs[0].mode_open and jobs[0].mode == "sync"
    assert (jobs[1].arch, jobs[1].mode, jobs[1].arch_open) == ("ps", "async", False)
    assert not jobs[2].arch_open
    path.write_text("arrival_s,gpus,arch\n0,1,ring\n")
    with pytest.raises(TraceFormatError, match=r"t.csv:2: field arch: expected ps, allreduce, any"):
        generic.load(path)


def test_trace_async_allreduce_is_refused(tmp_path) -> None:
    recs = [TraceRecord("bad", 0.0, 2, 100.0, model="vgg-16", arch="allreduce", mode="async")]
    with pytest.raises(ValueError, match="bad: mode async with arch allreduce"):
        to_jobs(recs, SIZER, np.random.default_rng(0))
