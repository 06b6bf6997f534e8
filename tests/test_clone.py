"""``Simulation.clone``: a lookahead's copy of an episode at a decision point."""

import copy

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
