"""What the engine and the analytic model keep between steps must follow the
state: the load check skipped for decisions that only keep running jobs, the
remembered arch/mode choices, the running jobs' per-round factors, and the
analytic model's per-job solve terms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hrlsched.cluster import Placement, Topology
from hrlsched.contract import Decision, InvalidDecisionError
from hrlsched.core import CATALOGUE
from hrlsched.perf import OptimusModel
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.sim import EngineConfig, Simulation
from hrlsched.sim.validation import decision_loads, loads, loads_after
from tests.conftest import small_spec
from tests.helpers import job

ENG = EngineConfig(round_s=60.0, restart_s=30.0)


def _open(j):
    return dataclasses.replace(j, arch_open=True, mode_open=True)


def test_kept_placements_after_a_preemption_leave_the_loads_of_what_runs(topo, perf) -> None:
    jobs = [job(0, samples=1e9, gpus=2), job(1, samples=1e9)]
    sim = Simulation(topo, jobs, perf, ENG)
    sim.reset()
    a, b = Placement((0, 1), (0,)), Placement((4,), (2,))
    sim.step(Decision({0: a, 1: b}))
    kept = sim.state.running[0]
    sim.step(Decision({0: kept}))  # job 0's own placement object, job 1 preempted
    st = sim.state
    want = loads(topo, [kept], [0], sim.res)
    np.testing.assert_array_equal(st.gpu_tasks, want[0])
    np.testing.assert_array_equal(st.cores_used, want[1])
    np.testing.assert_array_equal(st.mem_used, want[2])
    assert st.n_workers[1] == 0 and st.placements[1] is None
    # The same decision again changes nothing, and job 1 can come back where it was.
    sim.step(Decision({0: kept}))
    sim.step(Decision({0: kept, 1: b}))
    assert sim.state.gpu_tasks[4] == 1 and sim.state.restarts[1] == 1


def test_loads_of_a_decision_that_moves_jobs_are_summed_anew_or_refused(topo, perf) -> None:
    """``loads_after`` (the running jobs' loads with the jobs that move taken
    off and put back) gives ``decision_loads``' numbers to the bit, and leaves
    a decision over a limit to ``decision_loads``' error."""
    jobs = [job(0, samples=1e9, gpus=2), job(1, samples=1e9), job(2, samples=1e9, gpus=2)]
    sim = Simulation(topo, jobs, perf, ENG)
    sim.reset()
    assert sim._whole_loads
    st = sim.state
    steps = [{0: Placement((0, 1), (0,)), 1: Placement((4,), (2,))},
             {0: Placement((2, 3), (1,)), 1: Placement((4,), (2,)), 2: Placement((5, 6), (2, 3))},  # 0 moves, 2 starts
             {1: Placement((0,), (0,)), 2: Placement((5, 6), (2, 3))}]  # 0 preempted, 1 moves
    for placements in steps:
        kept = {i: st.running[i] if st.running.get(i) == pl else pl for i, pl in placements.items()}  # as kept
        out = {i: pl.canonical() for i, pl in kept.items()}
        assert [a.tobytes() for a in loads_after(out, st, topo, sim.res, 1)] == \
            [a.tobytes() for a in decision_loads(out, topo, sim.res, 1, st.jobs)]
        sim.step(Decision(kept))
    assert loads_after({**st.running, 0: Placement((0,), (0,))}, st, topo, sim.res, 1) is None  # GPU 0 is job 1's
    with pytest.raises(InvalidDecisionError, match="workers on GPU 0"):
        sim.step(Decision({1: st.running[1], 0: Placement((0,), (0,))}))


def test_a_missing_placement_is_refused_for_a_waiting_or_unknown_job(topo, perf) -> None:
    """The check that passes a running job's own placement object unchecked does not pass
    ``None`` for a job with no placement."""
    sim = Simulation(topo, [job(0, samples=1e9)], perf, ENG)
    sim.reset()
    with pytest.raises(InvalidDecisionError, match="placement must be a Placement"):
        sim.step(Decision({0: None}))  # type: ignore[dict-item]
    with pytest.raises(InvalidDecisionError, match="job 7: not active"):
        sim.step(Decision({7: None}))  # type: ignore[dict-item]


def test_kept_placement_with_a_new_arch_is_checked(topo, perf) -> None:
    sim = Simulation(topo, [_open(job(0, samples=1e9, arch="ps"))], perf, ENG)
    sim.reset()
    sim.step(Decision({0: Placement((0,), (0,))}))
    kept = sim.state.running[0]
    with pytest.raises(InvalidDecisionError, match="all-reduce job has no parameter servers"):
        sim.step(Decision({0: kept}, arch={0: "allreduce"}))


def test_repeated_choices_naming_a_finished_job_are_rejected(topo, perf) -> None:
    jobs = [_open(job(0, samples=10.0)), _open(job(1, samples=1e9))]
    sim = Simulation(topo, jobs, perf, ENG)
    sim.reset()
    arch, mode = {0: "ps", 1: "ps"}, {0: "sync", 1: "sync"}
    out = sim.step(Decision({0: Placement((0,), (0,)), 1: Placement((1,), (0,))}, arch=arch, mode=mode))
    assert out.completions == [0]
    with pytest.raises(InvalidDecisionError, match="job 0: arch given for a job that is not active"):
        sim.step(Decision({1: sim.state.running[1]}, arch=arch, mode=mode))
    # Named in the modes only (the check looks at the jobs finished since the last decision).
    sim.reset()
    sim.step(Decision({0: Placement((0,), (0,)), 1: Placement((1,), (0,))}, arch={1: "ps"}, mode=mode))
    with pytest.raises(InvalidDecisionError, match="job 0: mode given for a job that is not active"):
        sim.step(Decision({1: sim.state.running[1]}, arch={1: "ps"}, mode=mode))


def test_some_of_the_last_choices_after_a_job_finished_change_nothing(topo, perf) -> None:
    jobs = [_open(job(0, samples=10.0)), _open(job(1, samples=1e9)), _open(job(2, samples=1e9))]
    sim = Simulation(topo, jobs, perf, ENG)
    sim.reset()
    out = sim.step(Decision({0: Placement((0,), (0,)), 1: Placement((1,), (0,)), 2: Placement((2,))},
                            arch={0: "ps", 1: "ps", 2: "allreduce"}, mode={0: "sync", 1: "async"}))
    assert out.completions == [0]
    st = sim.state
    versions = list(st.jobs)
    out = sim.step(Decision({1: st.running[1], 2: st.running[2]}, arch={1: "ps", 2: "allreduce"}, mode={1: "async"}))
    assert not out.restarts and st.jobs == versions and (st.jobs[1].mode, st.jobs[2].arch) == ("async", "allreduce")
    # A choice the last decision did not make is checked in full.
    with pytest.raises(InvalidDecisionError, match="mode 'async' with arch 'allreduce'"):
        sim.step(Decision({1: st.running[1], 2: st.running[2]}, mode={2: "async"}))


def test_choices_of_a_rejected_decision_are_not_remembered(topo, perf) -> None:
    sim = Simulation(topo, [_open(job(0, samples=1e9, arch="ps"))], perf, ENG)
    sim.reset()
    sim.step(Decision({0: Placement((0,), (0,))}, arch={0: "ps"}))
    with pytest.raises(InvalidDecisionError):
        sim.step(Decision({0: Placement((0,), (0,))}, arch={0: "allreduce"}))  # a PS for all-reduce
    # The same choice with a valid placement: applied (not taken as the current one).
    out = sim.step(Decision({0: Placement((0,))}, arch={0: "allreduce"}))
    assert out.restarts == [0] and out.view.jobs[0].arch == "allreduce"


def test_round_integrals_follow_a_change_of_workers(topo, perf) -> None:
    sim = Simulation(topo, [job(0, samples=1e9)], perf, ENG)
    sim.reset()
    one, two = Placement((0,), (0,)), Placement((0, 1), (0,))
    for _ in range(3):
        sim.step(Decision({0: sim.state.running.get(0, one)}))
    for _ in range(2):
        sim.step(Decision({0: two if sim.state.placements[0] == one else sim.state.running[0]}))
    st = sim.state
    assert st.hold_s[0] == 300.0 and st.ps_s[0] == 300.0
    assert st.gpu_s[0] == st.worker_s[0] == st.attained[0] == 180.0 + 2 * 120.0
    assert st.prod_s[0] == 300.0 - 60.0  # two restart delays of 30 s
    assert st.slow_s[0] == pytest.approx(300.0)  # alone: slowdown 1


def test_analytic_terms_cache_gives_what_a_fresh_model_gives() -> None:
    topo = Topology.from_spec(small_spec(servers=3))
    kept = AnalyticModel(topo, CATALOGUE)
    models = ["resnet-50", "vgg-16", "bert", "deepspeech2"]
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(1, 5))
        jobs, pls = [], []
        free = list(rng.permutation(topo.n_gpus))
        for k in range(n):
            arch = "allreduce" if rng.random() < 0.5 else "ps"
            w = int(rng.integers(1, 4))
            gpus = tuple(int(free.pop()) for _ in range(w))
            ps = tuple(int(x) for x in rng.integers(0, topo.n_sockets, int(rng.integers(1, 3)))) if arch == "ps" else ()
            jobs.append(job(k, model=models[int(rng.integers(len(models)))], arch=arch))
            pls.append(Placement(gpus, ps))
        batch = rng.choice([16, 32, 64], size=n)
        fresh = AnalyticModel(topo, CATALOGUE)
        np.testing.assert_array_equal(kept.speeds(jobs, pls, batch), fresh.speeds(jobs, pls, batch))
        np.testing.assert_array_equal(kept.isolated_speeds(jobs, pls, batch), fresh.isolated_speeds(jobs, pls, batch))


def test_per_placement_caches_are_bounded_and_dropping_them_changes_nothing() -> None:
    """A long run meets new placements without end: past ``cache_entries``
    the analytic model drops its per-placement caches, with the same speeds
    (joint and alone) as a model that keeps everything, and stays bounded."""
    topo = Topology.from_spec(small_spec(servers=3))
    small = AnalyticModel(topo, CATALOGUE)
    small.cache_entries = 8
    big = AnalyticModel(topo, CATALOGUE)
    models = ["resnet-50", "vgg-16", "bert"]
    rng = np.random.default_rng(7)
    dropped = 0
    for _ in range(60):
        n = int(rng.integers(1, 4))
        free = list(rng.permutation(topo.n_gpus))
        jobs = [job(k, model=models[int(rng.integers(len(models)))], arch="ps") for k in range(n)]
        pls = [Placement(tuple(int(free.pop()) for _ in range(int(rng.integers(1, 4)))),
                         (int(rng.integers(topo.n_sockets)),)) for _ in range(n)]
        batch = rng.choice([16, 32], size=n)
        before = len(small._terms)
        for a, b in zip(small.speeds_and_alone(jobs, pls, batch, list(range(n))),
                        big.speeds_and_alone(jobs, pls, batch, list(range(n)))):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(small.alone_speeds(jobs, pls, batch), big.alone_speeds(jobs, pls, batch))
        dropped += len(small._terms) < before
        assert max(len(small._terms), len(small._rows), len(small._routed), len(small._alone_cache)) <= 8 + 2 * n
    assert dropped > 0 and len(big._terms) > 8 * 5, "no cache was dropped: the test shows nothing"


def test_repeated_solve_memo_tells_jobs_of_one_id_apart() -> None:
    """The last solve is reused only for the same models, architectures and
    modes: a job id names another job in another workload, and one job's
    architecture or mode can change while its placement stays (a bug once:
    the memo was keyed by job ids, so the async variant got the sync speed)."""
    topo = Topology.from_spec(small_spec(servers=2))
    pl = [Placement((0, 1, 2), (0,))]
    b = np.array([64])
    cases = [job(7, model="resnet-50"), job(7, model="resnet-50", mode="async"), job(7, model="vgg-16"),
             job(7, model="resnet-50", arch="allreduce")]
    kept = AnalyticModel(topo, CATALOGUE)
    for j in cases:
        p = [Placement((0, 1, 2))] if j.arch == "allreduce" else pl
        np.testing.assert_array_equal(kept.speeds([j], p, b), AnalyticModel(topo, CATALOGUE).speeds([j], p, b),
                                      err_msg=f"{j.model} {j.arch} {j.mode}")
    a = AnalyticModel(topo, CATALOGUE)
    sync, asyn = a.speeds([cases[0]], pl, b), a.speeds([cases[1]], pl, b)
    assert sync[0] != asyn[0]


@pytest.mark.parametrize("at", [0, 1, 2])
@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_a_non_positive_or_non_finite_speed_is_refused(topo, perf, bad, at) -> None:
    """The engine's check of the model's speeds (the least and the greatest, NaN
    propagating) refuses any bad value, wherever it is among the jobs."""
    class Bad(OptimusModel):
        def speeds_and_alone(self, *a, **k):  # noqa: ANN002, ANN003, ANN202
            sp, alone = super().speeds_and_alone(*a, **k)
            sp = sp.copy()
            sp[at] = bad
            return sp, alone

    jobs = [job(0, samples=1e9), job(1, samples=1e9), job(2, samples=1e9)]
    decision = Decision({0: Placement((0,), (0,)), 1: Placement((1,), (0,)), 2: Placement((2,), (1,))})
    sim = Simulation(topo, jobs, Bad(topo, CATALOGUE), ENG)
    sim.reset()
    with pytest.raises(RuntimeError, match=f"non-positive speed for job {at}"):
        sim.step(decision)
    sim = Simulation(topo, jobs, perf, ENG)
    sim.reset()
    sim.step(decision)
