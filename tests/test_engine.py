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


# ---------------------------------------------------------------- Simulation
import dataclasses  # noqa: E402

from hrlsched.contract import Decision  # noqa: E402
from hrlsched.policies.base import Allocation, AllocationPolicy, ComposedScheduler  # noqa: E402
from hrlsched.policies.placement.pack import PackPlacement  # noqa: E402
from hrlsched.sim import Simulation, StepResult  # noqa: E402


def _workload(n: int = 14, seed: int = 3, spread: float = 4000.0) -> list:
    rng = np.random.default_rng(seed)
    return [job(i, arrival=float(rng.uniform(0, spread)), samples=float(rng.uniform(1e3, 8e4)),
                gpus=int(rng.choice([1, 2, 4])), arch=str(rng.choice(["ps", "allreduce"]))) for i in range(n)]


def _episode(sim: Simulation, sched, seed: int = 0) -> tuple[list[StepResult], float]:
    view = sim.reset(seed)
    t0 = sim.state.time_s
    sched.reset(sim.topo, np.random.default_rng(seed))
    steps = []
    while view is not None:
        out = sim.step(sched.decide(view))
        steps.append(out)
        view = out.view
    return steps, t0


def _same_result(a, b) -> None:
    for f in ("start_s", "finish_s", "restarts", "gpu_seconds", "hold_s", "ps_seconds", "slowdown_seconds",
              "progress", "contention_seconds"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), err_msg=f)
    for k in a.rounds:
        np.testing.assert_allclose(a.rounds[k], b.rounds[k], err_msg=k)
    assert a.end_time_s == b.end_time_s and a.scheduler_calls == b.scheduler_calls


@pytest.mark.parametrize("policy", ["fifo", "tiresias", "optimus"])
def test_run_equals_a_manual_step_loop(topo, perf, policy) -> None:
    jobs = _workload()
    ran = Simulator(topo, jobs, perf, make_scheduler(policy), ENG, seed=5).run()
    sched = make_scheduler(policy)
    points, every = sched.points()
    cfg = dataclasses.replace(ENG, decision_points=points, decision_every=every)
    sim = Simulation(topo, jobs, perf, cfg)
    _episode(sim, sched, seed=5)
    _same_result(ran, sim.result())


@pytest.mark.parametrize("points", ["round", "events", "every"])
def test_step_accounting_sums_to_total_jct_and_end_time(topo, perf, points) -> None:
    jobs = _workload()
    cfg = dataclasses.replace(ENG, decision_points=points, decision_every=4)
    sim = Simulation(topo, jobs, perf, cfg)
    steps, t0 = _episode(sim, make_scheduler("fifo"))
    res = sim.result()
    assert steps[-1].done and steps[-1].view is None and not any(s.done for s in steps[:-1])
    assert np.all(np.isfinite(res.finish_s))
    jct = res.finish_s - np.array([j.arrival_s for j in res.jobs])
    assert sum(s.job_seconds for s in steps) == pytest.approx(jct.sum(), rel=1e-9)
    assert t0 + sum(s.elapsed_s for s in steps) == pytest.approx(res.end_time_s)
    assert steps[-1].time_s == res.end_time_s
    assert sum(s.rounds for s in steps) * ENG.round_s + t0 == pytest.approx(res.end_time_s)
    assert sorted(c for s in steps for c in s.completions) == sorted(j.job_id for j in jobs)
    assert sum(len(s.restarts) for s in steps) == int(res.restarts.sum())
    # Each arrival is reported once: at reset (in the first view) or by the step that admitted it.
    arrived = [j.job_id for j in sim.reset(0).jobs] + [a for s in steps for a in s.arrivals]
    assert sorted(arrived) == sorted(j.job_id for j in jobs)


def test_job_seconds_of_one_step_counts_a_finish_until_its_time(topo, perf) -> None:
    j = job(0, arrival=0.0, samples=5000.0, gpus=2)
    pl = Placement((0, 1), (0,))
    speed = perf.speeds([j], [pl])[0]
    sim = Simulation(topo, [j], perf, dataclasses.replace(ENG, decision_points="events"))
    sim.reset()
    out = sim.step(Decision({0: pl}))
    assert out.done and out.completions == [0] and out.restarts == [] and out.rounds > 1
    assert out.job_seconds == pytest.approx(30.0 + 5000.0 / speed)


def test_decision_point_modes(topo, perf) -> None:
    jobs = _workload()
    seen: dict[str, list[int]] = {}
    results = {}
    for points in ("round", "events", "every"):
        cfg = dataclasses.replace(ENG, decision_points=points, decision_every=5)
        sim = Simulation(topo, jobs, perf, cfg)
        view, rounds = sim.reset(0), []
        sched = make_scheduler("fifo")
        sched.reset(topo, np.random.default_rng(0))
        while view is not None:
            rounds.append(view.round_index)
            out = sim.step(sched.decide(view))
            if points == "events" and not out.done:
                assert out.arrivals or out.completions  # asked only when something happened
            view = out.view
        seen[points], results[points] = rounds, sim.result()
    busy = results["round"].rounds["jobs_running"] + results["round"].rounds["jobs_queued"]
    assert len(seen["round"]) == int(np.count_nonzero(busy))  # every round with an active job
    assert len(seen["events"]) < len(seen["round"])
    assert all(r % 5 == 0 for r in seen["every"])
    assert np.all(np.diff(seen["every"]) >= 5)
    # FIFO decides the same on events as every round; every 5 rounds, arrivals wait.
    np.testing.assert_allclose(results["events"].finish_s, results["round"].finish_s)
    assert results["every"].start_s.mean() > results["round"].start_s.mean()


def test_scheduler_decision_points_come_from_the_scheduler_unless_configured(topo, perf) -> None:
    jobs = _workload(6)
    fifo = make_scheduler("fifo")
    assert Simulator(topo, jobs, perf, fifo, ENG).cfg.decision_points == "events"
    # Tiresias' LAS is asked at events and at its demotions (Decision.recheck_s); Gittins every round.
    assert Simulator(topo, jobs, perf, make_scheduler("tiresias"), ENG).cfg.decision_points == "events"
    assert Simulator(topo, jobs, perf, make_scheduler("tiresias-gittins"), ENG).cfg.decision_points == "round"
    cfg = dataclasses.replace(ENG, decision_points="every", decision_every=3)
    assert Simulator(topo, jobs, perf, fifo, cfg).cfg.decision_points == "every"
    with pytest.raises(ValueError, match="decision_points"):
        EngineConfig(decision_points="sometimes")  # type: ignore[arg-type]
    periodic = _AllReduce()
    periodic.decision_points, periodic.decision_every = "every", 2
    sim = Simulator(topo, jobs, perf, ComposedScheduler(periodic, PackPlacement()), ENG)
    assert (sim.cfg.decision_points, sim.cfg.decision_every) == ("every", 2)


@pytest.mark.parametrize("placement", ["tiresias", "balance", "pack"])
def test_tiresias_asked_at_events_and_demotions_decides_as_every_round(topo, perf, placement) -> None:
    from hrlsched.policies.registry import PLACEMENTS
    from hrlsched.policies.tiresias import Tiresias

    jobs = _workload(24, seed=7, spread=3000.0)

    def sched() -> ComposedScheduler:  # thresholds low enough that jobs are demoted (and preempted) often
        return ComposedScheduler(Tiresias(thresholds=(500.0, 2500.0)), PLACEMENTS[placement].factory())

    fast = Simulator(topo, jobs, perf, sched(), ENG).run()
    every = Simulator(topo, jobs, perf, sched(), dataclasses.replace(ENG, decision_points="round")).run()
    assert fast.restarts.sum() > 0  # demotions did preempt
    for f in ("start_s", "finish_s", "restarts", "gpu_seconds", "hold_s", "progress"):
        np.testing.assert_allclose(getattr(fast, f), getattr(every, f), rtol=1e-9, err_msg=f)
    for k in fast.rounds:
        np.testing.assert_allclose(fast.rounds[k], every.rounds[k], rtol=1e-9, err_msg=k)
    assert fast.scheduler_calls < every.scheduler_calls


def test_reset_gives_identical_episodes(topo, perf) -> None:
    jobs = _workload()
    sim = Simulation(topo, jobs, perf, dataclasses.replace(ENG, decision_points="round"))
    a, _ = _episode(sim, make_scheduler("tiresias"), seed=2)
    ra = sim.result()
    b, _ = _episode(sim, make_scheduler("tiresias"), seed=2)
    _same_result(ra, sim.result())
    assert [s.job_seconds for s in a] == pytest.approx([s.job_seconds for s in b])
    assert [s.completions for s in a] == [s.completions for s in b]


# ------------------------------------------------------ architecture and mode
def _open(j, arch: bool = True, mode: bool = True):
    return dataclasses.replace(j, arch_open=arch, mode_open=mode)


def test_arch_choice_is_applied_passed_to_the_model_and_restarts(topo, perf) -> None:
    j = _open(job(0, samples=2e5, arch="ps"))
    sim = Simulation(topo, [j], perf, ENG)
    view = sim.reset()
    assert view.jobs[0].arch == "ps"
    out = sim.step(Decision({0: Placement((0,), (0,))}))
    assert out.restarts == []
    # Same GPU, now all-reduce (no PS): a restart, and the model sees an all-reduce job.
    out = sim.step(Decision({0: Placement((0,))}, arch={0: "allreduce"}))
    assert out.restarts == [0] and sim.state.restarts[0] == 1
    ar = out.view.jobs[0]
    assert ar.arch == "allreduce" and ar.job_id == 0 and sim.jobs[0] is not ar
    assert sim.state.speed[0] == pytest.approx(perf.speeds([ar], [Placement((0,))])[0])
    # Unchanged afterwards: no restart, and the same cached Job object.
    out2 = sim.step(Decision({0: Placement((0,))}))
    assert out2.restarts == [] and out2.view.jobs[0] is ar
    # Back to PS and again to all-reduce: the cached variants are reused.
    sim.step(Decision({0: Placement((0,), (0,))}, arch={0: "ps"}))
    out3 = sim.step(Decision({0: Placement((0,))}, arch={0: "allreduce"}))
    assert out3.view.jobs[0] is ar and sim.state.restarts[0] == 3


def test_mode_change_at_the_same_placement_restarts(topo, perf) -> None:
    j = _open(job(0, samples=2e5))
    pl = Placement((0, 1), (0,))
    sim = Simulation(topo, [j], perf, ENG)
    sim.reset()
    sim.step(Decision({0: pl}))
    out = sim.step(Decision({0: pl}, mode={0: "async"}))
    assert out.restarts == [0] and out.view.jobs[0].mode == "async"
    assert sim.state.hold_s[0] - sim.state.prod_s[0] == pytest.approx(60.0)  # two delays of 30 s
    # Naming the current value is no change.
    out = sim.step(Decision({0: pl}, mode={0: "async"}))
    assert out.restarts == []


def test_arch_of_a_queued_job_changes_without_restart(topo, perf) -> None:
    j = _open(job(0, samples=2e5, arch="ps"))
    sim = Simulation(topo, [j], perf, ENG)
    sim.reset()
    out = sim.step(Decision({}, arch={0: "allreduce"}))
    assert out.view.jobs[0].arch == "allreduce" and out.restarts == []
    out = sim.step(Decision({0: Placement((0,))}))
    assert out.restarts == [] and sim.state.restarts[0] == 0


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (Decision({0: Placement((0,))}, arch={0: "allreduce"}), "job 0: arch is fixed to 'ps'"),
        (Decision({0: Placement((0,), (0,))}, mode={0: "async"}), "job 0: mode is fixed to 'sync'"),
        (Decision({1: Placement((0,))}, arch={1: "ring"}), "job 1: arch must be one of"),
        (Decision({1: Placement((0,))}, mode={1: "semi"}), "job 1: mode must be one of"),
        (Decision({1: Placement((0,))}, arch={1: "ps"}), "job 1: a parameter-server job needs at least one PS"),
        (Decision({1: Placement((0,), (0,))}, arch={1: "allreduce"}), "job 1: an all-reduce job has no parameter"),
        (Decision({}, arch={7: "ps"}), "job 7: arch given for a job that is not active"),
    ],
)
def test_bad_arch_or_mode_decisions_are_rejected(topo, perf, decision, message) -> None:
    jobs = [job(0, samples=1e5), _open(job(1, samples=1e5, arch="allreduce"))]
    sim = Simulation(topo, jobs, perf, ENG)
    sim.reset()
    with pytest.raises(InvalidDecisionError, match=message):
        sim.step(decision)


def test_fixed_job_may_be_given_its_own_arch_and_mode(topo, perf) -> None:
    sim = Simulation(topo, [job(0, samples=1e5)], perf, ENG)
    sim.reset()
    out = sim.step(Decision({0: Placement((0,), (0,))}, arch={0: "ps"}, mode={0: "sync"}))
    assert out.restarts == []


class _AllReduce(AllocationPolicy):
    name = "allreduce-everything"

    def allocate(self, view):
        return {j.job_id: Allocation(1, 0, arch="allreduce") for j in view.jobs}


def test_composed_scheduler_passes_allocation_choices_to_placement_and_decision(topo, perf) -> None:
    j = _open(job(0, samples=1e4, arch="ps"))
    res = Simulator(topo, [j], perf, ComposedScheduler(_AllReduce(), PackPlacement()), ENG).run()
    assert np.isfinite(res.finish_s[0]) and res.ps_seconds[0] == 0.0


def test_composed_scheduler_takes_the_larger_gpu_share() -> None:
    alloc, place = _AllReduce(), PackPlacement()
    place.max_tasks_per_gpu = 3
    assert ComposedScheduler(alloc, place).max_tasks_per_gpu == 3
    alloc.max_tasks_per_gpu = 4
    assert ComposedScheduler(alloc, place).max_tasks_per_gpu == 4


# ------------------------------------------------------------------ predictor
def _first_view(topo, perf, jobs, cfg, oracle=False, seed=0):
    sim = Simulation(topo, jobs, perf, cfg, oracle=oracle)
    return sim, sim.reset(seed)


def test_predictor_defaults_to_the_truth(topo, perf) -> None:
    jobs = _workload(5, spread=0.0)
    sim, view = _first_view(topo, perf, jobs, ENG)
    assert view.perf is perf
    np.testing.assert_allclose(view.remaining, [j.total_samples for j in view.jobs])


def test_noisy_predictor_errs_per_job_by_seed_and_oracles_see_the_truth(topo, perf) -> None:
    jobs = _workload(6, spread=0.0)
    cfg = dataclasses.replace(ENG, predictor_noise=0.5, work_noise=0.5)
    pl = Placement((0, 1), (0,))
    truth = np.array([perf.alone_speed(j, pl) for j in jobs])
    _, v = _first_view(topo, perf, jobs, cfg, seed=1)
    pred = np.array([v.perf.alone_speed(j, pl) for j in v.jobs])
    ids = [j.job_id for j in v.jobs]
    ratio = pred / truth[ids]
    assert np.all(np.abs(np.log(ratio)) > 1e-6) and np.ptp(np.log(ratio)) > 0.05
    np.testing.assert_allclose(v.perf.speeds(v.jobs, [pl] * len(ids))[:1] / perf.speeds(v.jobs, [pl] * len(ids))[:1],
                               ratio[:1])
    assert not np.allclose(v.remaining, [j.total_samples for j in v.jobs])
    _, again = _first_view(topo, perf, jobs, cfg, seed=1)
    np.testing.assert_allclose([again.perf.alone_speed(j, pl) for j in again.jobs], pred)
    np.testing.assert_allclose(again.remaining, v.remaining)
    _, other = _first_view(topo, perf, jobs, cfg, seed=2)
    assert not np.allclose([other.perf.alone_speed(j, pl) for j in other.jobs], pred)
    _, oracle = _first_view(topo, perf, jobs, cfg, oracle=True, seed=1)
    assert oracle.perf is perf
    np.testing.assert_allclose(oracle.remaining, [j.total_samples for j in oracle.jobs])


def test_noise_changes_a_predicting_policy_but_not_an_oracle(topo, perf) -> None:
    jobs = _workload(16, seed=7)
    cfg = dataclasses.replace(ENG, work_noise=1.0, predictor_noise=1.0)
    for policy, moves in (("srtf", False), ("srtf-est", True)):
        exact = Simulator(topo, jobs, perf, make_scheduler(policy), ENG).run()
        noisy = Simulator(topo, jobs, perf, make_scheduler(policy), cfg).run()
        assert np.allclose(exact.finish_s, noisy.finish_s) != moves, policy


def test_scenario_settings_reach_the_engine_and_the_predictor() -> None:
    from hrlsched.config import ConfigError, resolve_run_config
    from hrlsched.run import simulate
    from hrlsched.scenario import build_scenario

    sets = ["workload.jobs=25", "predictor.noise=0.3", "predictor.work_noise=0.2", "predictor.backend=optimus",
            "sim.decision_points=every", "sim.decision_every=3"]
    cfg = resolve_run_config("default", "srtf-est", 0, sets)
    built = build_scenario(cfg.scenario, 0)
    e = built.engine
    assert (e.decision_points, e.decision_every, e.predictor_noise, e.work_noise) == ("every", 3, 0.3, 0.2)
    assert built.predictor is not None and built.predictor.name == "optimus"
    res = simulate(cfg)
    assert np.all(np.isfinite(res.finish_s))
    with pytest.raises(ConfigError, match="sim.decision_points"):
        resolve_run_config("default", overrides=["sim.decision_points=sometimes"])
    with pytest.raises(ConfigError, match="predictor.noise"):
        resolve_run_config("default", overrides=["predictor.noise=-1"])


def test_episode_stops_at_max_time_and_refuses_more_steps(topo, perf) -> None:
    cfg = dataclasses.replace(ENG, max_time_s=600.0, decision_points="round")
    sim = Simulation(topo, [job(0, samples=1e9)], perf, cfg)
    view, n = sim.reset(), 0
    while view is not None:
        out = sim.step(Decision({0: Placement((0,), (0,))}))
        view, n = out.view, n + 1
    assert out.done and sim.done and out.time_s == 600.0 and n == 10
    assert np.isnan(sim.result().finish_s[0])
    with pytest.raises(RuntimeError, match="episode is over"):
        sim.step(Decision())
