"""Asynchronous training in the performance models: speed without a barrier,
statistical efficiency that falls with staleness, refused combinations."""

from __future__ import annotations

import numpy as np
import pytest

from hrlsched.cluster import Placement, Topology
from hrlsched.cluster.spec import ClusterSpec, ServerGroupSpec
from hrlsched.core import CATALOGUE
from hrlsched.perf import OptimusModel, make_perf_model
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.perf.asynchrony import DEFAULT_STALENESS_PENALTY, async_efficiency
from tests.conftest import small_spec
from tests.helpers import job

MIXED = ClusterSpec(server_groups=[ServerGroupSpec(count=1, gpu_type="V100"), ServerGroupSpec(count=1, gpu_type="K80")])


def test_optimus_async_speed_is_the_sum_of_its_workers_own_paces() -> None:
    topo = Topology.from_spec(MIXED)
    m = OptimusModel(topo, CATALOGUE)
    th = np.array(CATALOGUE["resnet-50"].theta)
    j = job(0, model="resnet-50", gpus=2, batch=32, mode="async")
    fast, slow = 0, 8  # a V100 and a K80
    speed = topo.model_gpu_speed("resnet-50")  # the model's speed on each GPU (per type)
    got = m.speeds([j], [Placement((fast, slow), (0,))])[0]
    rest = th[1] + th[2] * 2 / 1 + th[3] * 2 + th[4] * 1
    expect = sum(32 / (th[0] * 32 / speed[g] + rest) for g in (fast, slow))
    assert got == pytest.approx(expect, rel=1e-9)
    # The slow worker does not hold the fast one back: more than twice the slow pace.
    assert got > 2 * 32 / (th[0] * 32 / speed[slow] + rest) * 1.01
    # A sync job is paced by its slowest GPU.
    sync = m.speeds([job(0, model="resnet-50", gpus=2, batch=64)], [Placement((fast, slow), (0,))])[0]
    assert sync == pytest.approx(64 / (th[0] * 32 / speed[slow] + rest), rel=1e-9)


def test_analytic_async_ignores_the_straggler_wait() -> None:
    topo = Topology.from_spec(small_spec())
    plain, strag = AnalyticModel(topo, CATALOGUE), AnalyticModel(topo, CATALOGUE, straggler=0.3)
    pl = Placement((0, 1, 2, 3), (0,))
    a = job(0, model="inception-bn", gpus=4, batch=32, mode="async")
    s = job(0, model="inception-bn", gpus=4, batch=128)
    assert strag.speeds([a], [pl])[0] == pytest.approx(plain.speeds([a], [pl])[0], rel=1e-12)
    assert strag.speeds([s], [pl])[0] < plain.speeds([s], [pl])[0] * 0.99


def test_analytic_async_job_shares_its_ps_link() -> None:
    # Two async jobs on one server whose PSs sit on another share its NIC.
    topo = Topology.from_spec(small_spec())
    m = AnalyticModel(topo, CATALOGUE)
    a, b = job(0, model="vgg-16", gpus=4, mode="async"), job(1, model="vgg-16", gpus=4, mode="async")
    pa, pb = Placement((0, 1, 2, 3), (2,)), Placement((4, 5, 6, 7), (3,))
    alone = m.speeds([a], [pa])[0]
    together = m.speeds([a, b], [pa, pb])
    assert together[0] < alone * 0.99


@pytest.mark.parametrize("backend", ["analytic", "optimus"])
def test_async_efficiency_falls_with_workers(backend: str) -> None:
    topo = Topology.from_spec(small_spec())
    m = make_perf_model(backend, topo, CATALOGUE)
    jobs, pls = [], []
    for w in range(1, 9):
        jobs.append(job(w, gpus=w, mode="async"))
        pls.append(Placement(tuple(range(w)), (0,)))
    eff = m.efficiency(jobs, pls, np.full(8, 32), np.zeros(8))
    assert eff[0] == pytest.approx(1.0)
    assert np.all(np.diff(eff) < 0)
    np.testing.assert_allclose(eff, 1 / (1 + DEFAULT_STALENESS_PENALTY * np.arange(8)))
    sync = [job(w, gpus=w) for w in range(1, 9)]
    np.testing.assert_allclose(m.efficiency(sync, pls, np.full(8, 32), np.zeros(8)), 1.0)


def test_progress_per_second_of_async_saturates() -> None:
    # Progress per second = speed x efficiency is bounded by one worker's speed / penalty.
    w = np.arange(1, 200)
    assert np.all(w * async_efficiency(w, 0.1) < 10.0)


@pytest.mark.parametrize("backend", ["analytic", "optimus"])
@pytest.mark.parametrize("bad", [-0.1, 1.5, "high"])
def test_staleness_penalty_out_of_range_is_named(backend: str, bad: object) -> None:
    topo = Topology.from_spec(small_spec())
    with pytest.raises(ValueError, match="perf.options.staleness_penalty"):
        make_perf_model(backend, topo, CATALOGUE, staleness_penalty=bad)


@pytest.mark.parametrize("backend", ["analytic", "optimus"])
def test_async_allreduce_is_refused(backend: str) -> None:
    topo = Topology.from_spec(small_spec())
    m = make_perf_model(backend, topo, CATALOGUE)
    with pytest.raises(ValueError, match="async.*allreduce.*arch 'ps'"):
        m.speeds([job(3, gpus=2, arch="allreduce", mode="async")], [Placement((0, 1))])


def test_isolated_speeds_match_alone_speed() -> None:
    topo = Topology.from_spec(small_spec(servers=3))
    for m in (AnalyticModel(topo, CATALOGUE), OptimusModel(topo, CATALOGUE)):
        jobs = [job(i, model=name, gpus=w, arch=arch, mode=mode)
                for i, (name, w, arch, mode) in enumerate([("vgg-16", 3, "ps", "sync"), ("dssm", 8, "ps", "async"),
                                                           ("resnet-50", 12, "allreduce", "sync"),
                                                           ("wlm", 5, "ps", "sync")])]
        pls = [m.compact_placement(j.requested_gpus, 2 if j.arch == "ps" else 0) for j in jobs]
        np.testing.assert_allclose(m.isolated_speeds(jobs, pls), [m.alone_speed(j, p) for j, p in zip(jobs, pls)],
                                   rtol=1e-12)
        for j, p in zip(jobs, pls):
            ceil = m.speed_ceiling(j, np.array([j.requested_gpus]))[0]
            assert m.alone_speed(j, p) <= ceil * (1 + 1e-12)
