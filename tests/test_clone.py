"""``Simulation.clone``: a lookahead's copy of an episode at a decision point."""

import copy
import dataclasses

import numpy as np
import pytest

from hrlsched.config import resolve_run_config
from hrlsched.policies.registry import make_scheduler
from hrlsched.scenario import build_scenario
from hrlsched.sim.simulation import Simulation
from hrlsched.sim.state import HELD_ROWS

SETS = ["workload.jobs=40", "workload.duration_h=2", "predictor.work_noise=0.5"]


def start(policy: str, seed: int = 1) -> tuple[Simulation, object, object]:
    cfg = resolve_run_config("default", policy, seed, SETS)
    b = build_scenario(cfg.scenario, seed)
    sched = make_scheduler(policy)
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, max_tasks_per_gpu=sched.max_tasks_per_gpu,
                     oracle=sched.oracle, predictor=b.predictor)
    sched.reset(b.topology, np.random.default_rng(seed))
    return sim, sched, sim.reset(seed)


def finish(sim: Simulation, sched: object, view: object) -> np.ndarray:
    while view is not None:
        view = sim.step(sched.decide(view)).view
    return sim.state.finish.copy()


def snapshot(sim: Simulation) -> dict:
    st = sim.state
    return {"time": st.time_s, "active": list(st.active), "progress": st.progress.copy(), "held": st.held.copy(),
            "per_held": st.per_held.copy(), "finish": st.finish.copy(), "record": list(st.record),
            "running": dict(st.running), "gpu_tasks": st.gpu_tasks.copy()}


@pytest.mark.parametrize("policy", ["tiresias+pack", "optimus+topology", "srtf"])
def test_a_clone_run_forward_gives_the_original_result_and_leaves_it_unchanged(policy: str) -> None:
    ref = finish(*start(policy))
    sim, sched, view = start(policy)
    for _ in range(15):  # into the episode: jobs running, preempted, finished
        view = sim.step(sched.decide(view)).view
    assert view is not None and sim.state.running
    before = snapshot(sim)
    twin, twin_sched = sim.clone(), copy.deepcopy(sched)
    st, ts = sim.state, twin.state
    # the copy's row views are views of its own arrays
    for i, name in enumerate(HELD_ROWS):
        assert np.shares_memory(getattr(ts, name), ts.held) and not np.shares_memory(getattr(ts, name), st.held)
        np.testing.assert_array_equal(getattr(ts, name), ts.held[i])
    assert np.shares_memory(ts.slowdown, ts.per_held) and ts.act_idx is None and ts.run_set is None
    got = finish(twin, twin_sched, view)
    np.testing.assert_array_equal(got, ref)
    after = snapshot(sim)  # the original did not move
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(after[k], v, err_msg=k)
        else:
            assert after[k] == v, k
    np.testing.assert_array_equal(finish(sim, sched, view), ref)  # and still runs to the same end


def test_a_plain_deepcopy_detaches_the_views() -> None:
    """Why ``clone`` exists: ``deepcopy`` copies ``attained`` apart from ``held``."""
    sim, sched, view = start("tiresias+pack")
    for _ in range(5):
        view = sim.step(sched.decide(view)).view
    st = copy.deepcopy(sim.state)
    assert not np.shares_memory(st.attained, st.held)
    cl = sim.state.clone()
    assert np.shares_memory(cl.attained, cl.held)


def start_exact(policy: str, seed: int = 1) -> tuple[Simulation, object, object, object]:
    cfg = resolve_run_config("default", policy, seed, SETS[:2])
    b = build_scenario(cfg.scenario, seed)
    sched = make_scheduler(policy)
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, max_tasks_per_gpu=sched.max_tasks_per_gpu,
                     oracle=sched.oracle, predictor=b.predictor)
    sched.reset(b.topology, np.random.default_rng(seed))
    return sim, sched, sim.reset(seed), b


def test_with_the_real_future_it_runs_as_the_original() -> None:
    """``with_future`` keeps the admitted jobs' state whole: given the jobs
    that were to arrive anyway, it runs to the original's end, to the bit."""
    ref = finish(*start_exact("tiresias+pack")[:3])
    sim, sched, view, _ = start_exact("tiresias+pack")
    for _ in range(15):
        view = sim.step(sched.decide(view)).view
    k = sim.state.next_arrival
    assert view is not None and sim.state.running and 0 < k < len(sim.jobs)
    before = snapshot(sim)
    twin = sim.with_future(sim.jobs[k:])
    ts = twin.state
    assert np.shares_memory(ts.attained, ts.held) and np.shares_memory(ts.slowdown, ts.per_held)
    np.testing.assert_array_equal(finish(twin, copy.deepcopy(sched), view), ref)
    np.testing.assert_array_equal(sim.state.progress, before["progress"])
    np.testing.assert_array_equal(finish(sim, sched, view), ref)


def test_another_future_replaces_the_arrivals_only() -> None:
    sim, sched, view, b = start_exact("optimus+pack")
    for _ in range(10):
        view = sim.step(sched.decide(view)).view
    k, now = sim.state.next_arrival, sim.state.time_s
    later = [j for j in b.sample_jobs(77) if j.arrival_s > now]
    first = max(j.job_id for j in sim.jobs) + 1
    future = [dataclasses.replace(j, job_id=first + i) for i, j in enumerate(later)]
    twin = sim.with_future(future)
    assert [j.job_id for j in twin.jobs[:k]] == [j.job_id for j in sim.jobs[:k]]
    assert [j.job_id for j in twin.jobs[k:]] == [j.job_id for j in future]
    np.testing.assert_array_equal(twin.state.progress[:k], sim.state.progress[:k])
    assert not twin.state.is_active[k:].any() and twin.state.next_arrival == k
    got = finish(twin, copy.deepcopy(sched), view)
    assert not np.isnan(got).any() and len(got) == k + len(future)
    with pytest.raises(ValueError, match="not after now"):
        sim.with_future([dataclasses.replace(sim.jobs[0], job_id=first)])
