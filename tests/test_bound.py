"""The lower bound on JCT: below what every policy achieves, exact for one job."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from hrlsched.cluster import Topology
from hrlsched.config import SyntheticWorkload
from hrlsched.core import CATALOGUE
from hrlsched.experiments.bound import job_floors, lower_bound
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.perf.optimus import OptimusModel
from hrlsched.policies import make_scheduler
from hrlsched.sim import EngineConfig, Simulator
from hrlsched.workload.synthetic import generate_synthetic
from tests.conftest import small_spec
from tests.helpers import Scripted, job

TOPO = Topology.from_spec(small_spec(servers=2))
ENG = EngineConfig(round_s=60.0)


def built(perf, jobs, eng=ENG) -> SimpleNamespace:
    return SimpleNamespace(perf=perf, jobs=jobs, engine=eng, topology=perf.topology)


@pytest.mark.parametrize("backend", [AnalyticModel, OptimusModel])
def test_bound_is_below_every_policy(backend) -> None:
    perf = backend(TOPO, CATALOGUE)
    cfg = SyntheticWorkload(jobs=25, duration_h=1.0, open_fraction=0.3, duration_median_s=600.0)
    jobs = generate_synthetic(cfg, perf.work_sizer(), np.random.default_rng(4))
    floors = job_floors(built(perf, jobs))
    for policy in ("fifo", "srtf", "tiresias", "optimus", "drf", "optimus+pack"):
        res = Simulator(TOPO, jobs, perf, make_scheduler(policy), ENG).run()
        jct = res.finish_s - np.array([j.arrival_s for j in jobs])
        assert np.all(~np.isnan(jct)), policy
        assert np.all(floors <= jct * (1 + 1e-9)), (policy, np.flatnonzero(floors > jct))
        assert lower_bound(built(perf, jobs))["avg_jct_s"] <= jct.mean()


def test_bound_equals_the_isolated_jct_of_a_single_job() -> None:
    perf = AnalyticModel(TOPO, CATALOGUE)
    j = job(0, arrival=30.0, model="resnet-50", samples=2e5, gpus=2, batch=64)
    b = built(perf, [j])
    floor = float(job_floors(b)[0])
    # Brute force over the same family: every w, every p up to the sockets spanned.
    best, arg = 0.0, None
    for w in range(1, TOPO.n_gpus + 1):
        for p in range(1, len(set(TOPO.gpu_socket[:w].tolist())) + 1):
            pl = perf.compact_placement(w, p)
            s = perf.alone_speed(j, pl)
            if s > best:
                best, arg = s, pl
    expect = (60.0 - 30.0) + CATALOGUE["resnet-50"].restart_s + j.total_samples / best
    assert floor == pytest.approx(expect, rel=1e-9)
    # The engine gives the same JCT to the job run alone at that allocation.
    res = Simulator(TOPO, [j], perf, Scripted(lambda v: {0: arg} if v.jobs else {}), ENG).run()
    assert res.finish_s[0] - j.arrival_s == pytest.approx(floor, rel=1e-9)
    no_launch = job_floors(built(perf, [j], EngineConfig(round_s=60.0, restart_on_first_start=False)))[0]
    assert floor - no_launch == pytest.approx(CATALOGUE["resnet-50"].restart_s)


def test_open_jobs_can_only_lower_the_bound() -> None:
    perf = OptimusModel(TOPO, CATALOGUE)
    jobs = [job(i, arrival=60.0 * i, model=m, samples=5e4, gpus=2) for i, m in enumerate(["vgg-16", "dssm", "wlm"])]
    closed = job_floors(built(perf, jobs))
    opened = job_floors(built(perf, [replace(j, arch_open=True, mode_open=True) for j in jobs]))
    assert np.all(opened <= closed * (1 + 1e-12))


class _Unmeasured(AnalyticModel):
    """A backend with no data beyond 4 workers (as a measured backend's
    tables end): it raises there, as ``perf.goodput`` does."""

    name = "measured"
    prices_everything = False

    def speeds(self, jobs, placements, batch_sizes, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN201
        if any(pl.n_workers > 4 for pl in placements):
            raise ValueError("no measurement near this placement")
        return super().speeds(jobs, placements, batch_sizes, *a, **kw)

    def isolated_speeds(self, jobs, placements, batch_sizes=None):  # noqa: ANN001, ANN201
        if any(pl.n_workers > 4 for pl in placements):
            raise ValueError("no measurement near this placement")
        return super().isolated_speeds(jobs, placements, batch_sizes)


def test_placements_a_backend_cannot_price_are_left_out_of_the_bound() -> None:
    """The bound searches every allocation; one a measured backend has no
    data for cannot be the job's best and must not stop the search."""
    j = job(0, arrival=0.0, model="resnet-50", samples=2e5, gpus=2, batch=64, arch="ps", mode="sync")
    full = float(job_floors(built(AnalyticModel(TOPO, CATALOGUE), [j]))[0])
    part = float(job_floors(built(_Unmeasured(TOPO, CATALOGUE), [j]))[0])
    assert np.isfinite(part) and part >= full  # fewer allocations searched: a floor no lower


def test_a_search_past_its_budget_stays_a_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``SEARCH_BUDGET`` the worker counts left count at their ceiling: each
    job's floor can only drop (a looser bound, never above the exact one), and
    the searches so stopped are counted."""
    from hrlsched.experiments import bound

    perf = AnalyticModel(TOPO, CATALOGUE)
    cfg = SyntheticWorkload(jobs=25, duration_h=1.0, open_fraction=0.3, duration_median_s=600.0)
    jobs = generate_synthetic(cfg, perf.work_sizer(), np.random.default_rng(4))
    exact = bound.BestRates(perf)
    full = job_floors(built(perf, jobs), rates=exact)
    assert exact.capped == 0
    monkeypatch.setattr(bound, "SEARCH_BUDGET", 1)
    cut = bound.BestRates(perf)
    capped = job_floors(built(perf, jobs), rates=cut)
    assert cut.capped > 0
    assert np.all(capped <= full * (1 + 1e-12)) and np.any(capped < full)
