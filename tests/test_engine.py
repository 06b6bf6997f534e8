import numpy as np
import pytest

from hrlsched.cluster import Placement, Topology
from hrlsched.perf import OptimusModel
from hrlsched.policies import make_scheduler
from hrlsched.sim import EngineConfig, InvalidDecisionError, Simulator
from hrlsched.sim.metrics import job_table, summary
from tests.helpers import Scripted, job

ENG = EngineConfig(round_s=60.0, restart_s=30.0)


def always(placements: dict[int, Placement]):
    def fn(view):
        active = {j.job_id for j in view.jobs}
        return {k: v for k, v in placements.items() if k in active}

    return fn


def test_job_finishes_at_its_exact_time(topo: Topology, perf: OptimusModel) -> None:
    j = job(0, arrival=0.0, samples=5000.0, gpus=2)
    pl = Placement((0, 1), (0,))
    speed = perf.speeds([j], [pl])[0]
    res = Simulator(topo, [j], perf, Scripted(always({0: pl})), ENG).run()
    assert res.finish_s[0] == pytest.approx(30.0 + 5000.0 / speed)
    assert res.start_s[0] == 0.0
    assert res.progress[0] == pytest.approx(5000.0)
    assert res.productive_s[0] * speed == pytest.approx(5000.0)


def test_arrival_waits_for_next_round(topo: Topology, perf: OptimusModel) -> None:
    j = job(0, arrival=61.0, samples=100.0)
    res = Simulator(topo, [j], perf, Scripted(always({0: Placement((0,), (0,))})), ENG).run()
    assert res.start_s[0] == 120.0  # admitted at the first round boundary after arrival
    t = job_table(res)
    assert t["queue_s"][0] == pytest.approx(59.0)


def test_moving_a_job_pays_restart_and_counts(topo: Topology, perf: OptimusModel) -> None:
    j = job(0, samples=1e6)
    a, b = Placement((0,), (0,)), Placement((1,), (0,))

    def fn(view):
        return {0: a if view.round_index < 3 else b}

    res = Simulator(topo, [j], perf, Scripted(fn), ENG).run()
    speed = perf.speeds([j], [a])[0]
    assert res.restarts[0] == 1
    # Two delays of 30 s in all (first start and one move).
    assert res.finish_s[0] == pytest.approx(60.0 + 1e6 / speed)


def test_preemption_stops_progress(topo: Topology, perf: OptimusModel) -> None:
    j = job(0, samples=1e6)
    pl = Placement((0,), (0,))

    def fn(view):
        return {0: pl} if view.round_index % 2 == 0 else {}

    res = Simulator(topo, [j], perf, Scripted(fn), ENG).run()
    t = job_table(res)
    assert t["queue_s"][0] > 0
    assert res.hold_s[0] + t["queue_s"][0] == pytest.approx(t["jct_s"][0])
    speed = perf.speeds([j], [pl])[0]
    assert res.productive_s[0] * speed == pytest.approx(1e6)


@pytest.mark.parametrize(
    ("placements", "message"),
    [
        ({0: Placement((0, 0), (0,))}, "same GPU"),
        ({0: Placement((99,), (0,))}, "out of range"),
        ({0: Placement((0,), ())}, "at least one PS"),
        ({0: Placement((), (0,))}, "at least one worker"),
        ({0: Placement((0,), (0,)), 1: Placement((0,), (0,))}, "workers on GPU 0"),
    ],
)
def test_invalid_decisions_are_rejected_with_the_job_and_reason(topo, perf, placements, message) -> None:
    jobs = [job(0, samples=1e5), job(1, samples=1e5)]
    with pytest.raises(InvalidDecisionError, match=message):
        Simulator(topo, jobs, perf, Scripted(always(placements)), ENG).run()


def test_decision_for_an_unknown_or_future_job_is_rejected(topo, perf) -> None:
    jobs = [job(0, samples=1e5), job(1, arrival=1000.0, samples=1e5)]
    fn = lambda view: {0: Placement((0,), (0,)), 1: Placement((1,), (0,))}  # noqa: E731
    with pytest.raises(InvalidDecisionError, match="job 1: not active"):
        Simulator(topo, jobs, perf, Scripted(fn), ENG).run()


def test_allreduce_job_must_not_have_ps(topo, perf) -> None:
    j = job(0, arch="allreduce")
    with pytest.raises(InvalidDecisionError, match="job 0: an all-reduce job has no parameter servers"):
        Simulator(topo, [j], perf, Scripted(always({0: Placement((0,), (0,))})), ENG).run()


def test_cpu_capacity_is_enforced(topo, perf) -> None:
    # 40 PSs of 2 cores on server 0 (32 cores) cannot fit.
    j = job(0, samples=1e5)
    pl = Placement((0,), tuple([0] * 40))
    with pytest.raises(InvalidDecisionError, match="CPU cores on server 0"):
        Simulator(topo, [j], perf, Scripted(always({0: pl})), ENG).run()


def test_gpu_sharing_is_a_decision_and_halves_speed(topo, perf) -> None:
    jobs = [job(0, samples=1e5), job(1, samples=1e5)]
    pls = {0: Placement((0,), (0,)), 1: Placement((0,), (0,))}
    res = Simulator(topo, jobs, perf, Scripted(always(pls), max_tasks_per_gpu=2), ENG).run()
    alone = perf.speeds([jobs[0]], [pls[0]])[0]
    shared = perf.speeds(jobs, [pls[0], pls[1]])[0]
    assert shared < alone
    assert res.finish_s[0] == pytest.approx(30.0 + 1e5 / shared)
    assert job_table(res)["mean_slowdown"][0] == pytest.approx(alone / shared)


def test_batch_size_change_is_a_restart(topo, perf) -> None:
    from hrlsched.contract import Decision

    j = job(0, samples=1e6)
    pl = Placement((0,), (0,))

    def fn(view):
        return Decision({0: pl}, {0: 64} if view.round_index >= 2 else {})

    res = Simulator(topo, [j], perf, Scripted(fn), ENG).run()
    assert res.restarts[0] == 1


def test_fifo_is_strict_and_completes_everything(topo, perf) -> None:
    # 16 GPUs: job 0 takes 12, job 1 wants 8 (blocked), job 2 wants 1 (blocked behind 1).
    jobs = [job(0, samples=2e5, gpus=12), job(1, arrival=1, samples=1e4, gpus=8), job(2, arrival=2, samples=1e3)]
    res = Simulator(topo, jobs, perf, make_scheduler("fifo"), ENG).run()
    assert np.all(~np.isnan(res.finish_s))
    assert res.start_s[2] >= res.start_s[1] >= res.finish_s[0] - 60
    s = summary(res, "fifo", "t")
    assert s["jobs_completed"] == 3


def test_job_larger_than_cluster_is_refused(topo, perf) -> None:
    with pytest.raises(ValueError, match="requests 64 GPUs"):
        Simulator(topo, [job(0, gpus=64)], perf, make_scheduler("fifo"), ENG)


def test_event_driven_skipping_matches_round_by_round(topo, perf) -> None:
    rng = np.random.default_rng(3)
    jobs = [job(i, arrival=float(rng.uniform(0, 3000)), samples=float(rng.uniform(1e3, 5e4)),
                gpus=int(rng.choice([1, 2, 4]))) for i in range(12)]
    fast = make_scheduler("fifo")
    slow = make_scheduler("fifo")
    slow.event_driven = False
    a = Simulator(topo, jobs, perf, fast, ENG).run()
    b = Simulator(topo, jobs, perf, slow, ENG).run()
    np.testing.assert_allclose(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.rounds["gpus_busy"], b.rounds["gpus_busy"])
    assert a.scheduler_calls < b.scheduler_calls
