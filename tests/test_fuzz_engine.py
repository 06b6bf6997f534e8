"""Invariants of the engine under random valid decisions (issue 14).

A random scheduler starts, keeps, preempts, resizes and migrates jobs at
random, within capacity; random built-in policies run on small random
scenarios. After every step: no GPU holds more tasks than allowed, no job
runs without a placement, work never decreases and never passes the total,
time advances, every job ends finished or reported unfinished; the same seed
gives the same per-job results. The number of cases tried is printed at the
end of the test session (``conftest.pytest_terminal_summary``), xdist or not."""

from __future__ import annotations

import json
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hrlsched.cluster import ClusterSpec, ServerGroupSpec, Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core import CATALOGUE, Job, Placement
from hrlsched.perf import OptimusModel
from hrlsched.policies.base import Scheduler
from hrlsched.policies.placement.occupancy import Occupancy
from hrlsched.policies.registry import make_scheduler
from hrlsched.sim.engine import Simulator
from hrlsched.sim.simulation import EngineConfig, Simulation
from hrlsched.sim.validation import loads
from tests.conftest import fuzz_tally_dir

CASES = {"random decisions": 0, "random policies": 0}


def _tally(kind: str) -> None:
    CASES[kind] += 1
    d = fuzz_tally_dir()
    d.mkdir(exist_ok=True)
    (d / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.json").write_text(json.dumps(CASES))
MODELS = sorted(CATALOGUE)[:6]


class RandomScheduler(Scheduler):
    """Valid but arbitrary decisions: each active job is kept, moved, resized,
    started or left waiting at random; what is placed always fits."""

    name = "random-fuzz"

    def __init__(self, rng: np.random.Generator, share: int) -> None:
        self.rng = rng
        self.max_tasks_per_gpu = share

    def decide(self, view: ClusterView) -> Decision:
        rng, topo = self.rng, view.topology
        occ = Occupancy(view, self.max_tasks_per_gpu)
        out: dict[int, Placement] = {}
        order = rng.permutation(len(view.jobs))
        keep = [i for i in order if view.placements[i] is not None and rng.random() < 0.6]
        occ.commit_many([view.jobs[i] for i in keep], [view.placements[i] for i in keep])
        out.update({view.jobs[i].job_id: view.placements[i] for i in keep})
        for i in order:
            job = view.jobs[i]
            if job.job_id in out or rng.random() < 0.25:
                continue  # waits, or is preempted
            free = np.flatnonzero(occ.gpu_free > 0)
            if free.size == 0:
                continue
            w = int(rng.integers(1, min(4, free.size) + 1))
            gpus = rng.choice(free, size=w, replace=False)
            ps = ()
            if job.arch == "ps":
                ps = tuple(int(s) for s in rng.integers(0, topo.n_sockets, size=int(rng.integers(1, 3))))
            pl = Placement.of(gpus, ps)
            if occ.fits(job, pl):
                occ.commit(job, pl)
                out[job.job_id] = pl
        return Decision(placements=out)


def _jobs(rng: np.random.Generator, n: int) -> list[Job]:
    arrivals = np.sort(rng.uniform(0, 3 * 3600, size=n))
    return [Job(job_id=k, arrival_s=float(arrivals[k]), model=str(rng.choice(MODELS)),
                total_samples=float(rng.uniform(2e3, 4e5)), batch_size=int(rng.choice([32, 64, 128])),
                requested_gpus=int(rng.choice([1, 2, 4])), requested_ps=int(rng.integers(1, 3)),
                arch="ps" if rng.random() < 0.6 else "allreduce")
            for k in range(n)]


def _topology(servers: int) -> Topology:
    return Topology.from_spec(ClusterSpec(server_groups=[
        ServerGroupSpec(count=servers, sockets=2, switches_per_socket=2, gpus_per_switch=2)]))


def _episode(sim: Simulation, decide, share: int, seed: int) -> None:  # noqa: ANN001
    view = sim.reset(seed)
    last_t, last_progress = -1.0, None
    steps = 0
    while view is not None:
        assert view.time_s > last_t, "time advances between decision points"
        last_t = view.time_s
        out = sim.step(decide(view))
        st_ = sim.state
        steps += 1
        assert st_.gpu_tasks.min() >= 0 and st_.gpu_tasks.max() <= share, "GPU task limit"
        for i, pl in st_.running.items():
            assert pl is not None and pl.n_workers >= 1 and st_.placements[i] == pl, "running without placement"
            assert st_.is_active[i] and not st_.done[i]
        running = np.zeros(len(st_.jobs), dtype=bool)
        running[list(st_.running)] = True
        # the engine's loads (kept from step to step, and taken as a decision's starting point) are
        # its running jobs', to the bit
        want = loads(sim.topo, list(st_.running.values()), list(st_.running), sim.res)
        for have, w in zip((st_.gpu_tasks, st_.cores_used, st_.mem_used), want):
            assert have.tobytes() == w.astype(have.dtype).tobytes(), "loads of the running jobs"
        assert np.all(st_.n_workers[~running] == 0), "workers counted for a job that does not run"
        # (a round where no job finishes or restarts adds dt itself to prod_s: per_held's row 1 times dt)
        assert np.all(st_.per_held[1] == 1.0) and np.all(st_.prod_s <= st_.hold_s), "seconds held outside restarts"
        if last_progress is not None:
            assert np.all(st_.progress >= last_progress - 1e-9), "work never decreases"
        total = np.array([j.total_samples for j in st_.jobs])
        assert np.all(st_.progress <= total * (1 + 1e-9))
        last_progress = st_.progress.copy()
        assert out.elapsed_s >= 0 and (out.done or out.elapsed_s > 0)
        view = out.view
        assert steps < 20_000
    res = sim.result()
    finished = ~np.isnan(res.finish_s)
    assert np.all(res.progress[finished] >= np.array([j.total_samples for j in res.jobs])[finished] * (1 - 1e-9))
    assert np.all(np.isnan(res.finish_s[~finished])), "every job is finished or reported unfinished"
    assert np.all(res.finish_s[finished] >= np.array([j.arrival_s for j in res.jobs])[finished])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), n=st.integers(1, 14), servers=st.integers(1, 3), share=st.sampled_from([1, 2]),
       points=st.sampled_from(["round", "events", "every"]))
def test_random_valid_decisions_keep_the_invariants(seed: int, n: int, servers: int, share: int, points: str) -> None:
    _tally("random decisions")
    rng = np.random.default_rng(seed)
    topo = _topology(servers)
    perf = OptimusModel(topo, CATALOGUE)
    sched = RandomScheduler(np.random.default_rng(seed + 1), share)
    cfg = EngineConfig(round_s=300.0, decision_points=points, decision_every=2, max_time_s=20 * 86400.0)
    sim = Simulation(topo, _jobs(rng, n), perf, cfg, max_tasks_per_gpu=share)
    _episode(sim, sched.decide, share, seed)


ALLOCATIONS = ["fifo", "srtf", "drf", "tetris", "optimus", "elas", "tiresias", "tiresias-gittins"]
PLACEMENTS = ["pack", "balance", "random", "topology", "tiresias"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), n=st.integers(1, 12), servers=st.integers(1, 3),
       alloc=st.sampled_from(ALLOCATIONS), place=st.sampled_from(PLACEMENTS))
def test_random_policies_keep_the_invariants_and_repeat(seed: int, n: int, servers: int, alloc: str,
                                                         place: str) -> None:
    _tally("random policies")
    topo = _topology(servers)
    perf = OptimusModel(topo, CATALOGUE)
    jobs = _jobs(np.random.default_rng(seed), n)
    results = []
    for _ in range(2):
        sched = make_scheduler(f"{alloc}+{place}")
        sched.reset(topo, np.random.default_rng(seed))
        pts, every = sched.points()
        sim = Simulation(topo, jobs, perf, EngineConfig(round_s=300.0, decision_points=pts, decision_every=every),
                         max_tasks_per_gpu=sched.max_tasks_per_gpu, oracle=sched.oracle)
        _episode(sim, sched.decide, sched.max_tasks_per_gpu, seed)
        results.append(sim.result())
    a, b = results
    np.testing.assert_allclose(a.finish_s, b.finish_s, rtol=1e-9, equal_nan=True)
    np.testing.assert_array_equal(a.restarts, b.restarts)
    # and through the public Simulator.run: the same jobs.csv figures
    run = Simulator(topo, jobs, perf, make_scheduler(f"{alloc}+{place}"), EngineConfig(round_s=300.0),
                    seed=seed).run()
    np.testing.assert_allclose(run.finish_s, a.finish_s, rtol=1e-9, equal_nan=True)
