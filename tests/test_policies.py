from dataclasses import replace

import numpy as np
import pytest

from hrlsched.cluster import ClusterSpec, Placement, ServerGroupSpec, Topology, uniform_cluster
from hrlsched.core import CATALOGUE, Job
from hrlsched.perf import OptimusModel
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.policies import make_scheduler
from hrlsched.policies.common import capacity, job_demand
from hrlsched.policies.drf import DRF
from hrlsched.policies.hint import HintConfig
from hrlsched.policies.optimus import Optimus
from hrlsched.policies.placement.interference_aware import TopologyPlacement
from hrlsched.policies.registry import ALLOCATIONS, PLACEMENTS
from hrlsched.policies.tetris import Tetris
from hrlsched.policies.tiresias import Tiresias, gittins_index
from hrlsched.sim import EngineConfig, Simulator
from tests.helpers import job, make_view


def test_drf_equalises_dominant_shares(topo: Topology, perf: OptimusModel) -> None:
    jobs = [job(0, model="vgg-16", gpus=16), job(1, model="dssm", gpus=16), job(2, model="resnet-50", gpus=16)]
    view = make_view(topo, perf, jobs)
    DRF().reset(topo, np.random.default_rng(0))
    alloc = DRF().allocate(view)
    cap = capacity(view)
    shares = [float(np.max(job_demand(view, k, alloc[j.job_id].workers, alloc[j.job_id].ps) / cap)) for k, j in enumerate(jobs)]
    one_task = max(float(np.max(job_demand(view, k, 1, 1) / cap)) for k in range(3))
    assert sum(a.workers for a in alloc.values()) == topo.n_gpus
    assert max(shares) - min(shares) <= one_task + 1e-9


def test_tiresias_demotes_past_threshold_and_preempts(perf: OptimusModel) -> None:
    topo = Topology.from_spec(uniform_cluster(2, 8))
    model = OptimusModel(topo, CATALOGUE)
    long = job(0, arrival=0.0, samples=1e5, gpus=16)
    short = job(1, arrival=1200.0, samples=2e3, gpus=8)
    sched = make_scheduler("tiresias")
    sched.allocation = Tiresias(thresholds=(16 * 600.0,))  # 10 minutes on 16 GPUs
    res = Simulator(topo, [long, short], model, sched, EngineConfig(round_s=60.0, restart_s=10.0)).run()
    assert res.start_s[1] == pytest.approx(1200.0)  # the new job preempts the demoted one at once
    assert res.restarts[0] >= 1
    assert res.finish_s[1] < res.finish_s[0]


def test_tiresias_preempts_only_once_the_old_job_is_demoted(perf: OptimusModel) -> None:
    topo = Topology.from_spec(uniform_cluster(2, 8))
    model = OptimusModel(topo, CATALOGUE)
    long = job(0, arrival=0.0, samples=1e5, gpus=16)
    short = job(1, arrival=1200.0, samples=2e3, gpus=8)
    res = Simulator(topo, [long, short], model, make_scheduler("tiresias"), EngineConfig(round_s=60.0)).run()
    # Same queue (FIFO) until the long job's 16 x 3600 GPU-s pass the 16 GPU-hour threshold.
    assert res.start_s[1] == pytest.approx(3600.0)
    assert res.finish_s[0] > 3600.0


def test_gittins_index_orders_by_chance_to_finish() -> None:
    samples = np.array([10.0] * 9 + [1000.0])
    g = gittins_index(samples, np.array([0.0, 10.0, 500.0]), np.array([10.0, 10.0, 10.0]))
    assert g[0] == pytest.approx(0.9 / 10.0)
    assert g[0] > g[1] and g[1] == 0.0


def test_tiresias_gittins_orders_queue_by_index(topo: Topology, perf: OptimusModel) -> None:
    pol = Tiresias(thresholds=(1e9,), gittins=True, min_history=3)
    pol.reset(topo, np.random.default_rng(0))
    pol.history = [100.0] * 9 + [1e5]
    jobs = [job(0, arrival=0.0, gpus=16), job(1, arrival=1.0, gpus=16)]
    # Job 0 has passed the point where most jobs finish; job 1 has not: job 1 goes first.
    view = make_view(topo, perf, jobs, attained=[150.0, 50.0])
    assert list(pol.allocate(view)) == [1]


def test_optimus_gives_next_task_to_largest_gain(perf: OptimusModel) -> None:
    topo = Topology.from_spec(uniform_cluster(1, 4, sockets=1))
    model = OptimusModel(topo, CATALOGUE)
    scales = job(0, model="dssm", gpus=1, samples=1e7, batch=1024)  # compute-bound: more workers help
    stuck = job(1, model="vgg-16", gpus=1, samples=1e7, batch=32)  # communication-bound
    view = make_view(topo, model, [scales, stuck])
    pol = Optimus()
    pol.reset(topo, np.random.default_rng(0))
    alloc = pol.allocate(view)
    assert alloc[0].workers > alloc[1].workers
    assert alloc[0].workers + alloc[1].workers == 4


def test_optimus_remaining_weight_stops_favouring_the_longest_job() -> None:
    topo = Topology.from_spec(uniform_cluster(1, 8, sockets=1))
    model = OptimusModel(topo, CATALOGUE)
    jobs = [job(0, model="dssm", gpus=8, samples=1e9, batch=1024), job(1, model="dssm", gpus=8, samples=1e9, batch=1024)]
    view = make_view(topo, model, jobs)
    got = {}
    for a in (0.0, 1.0):
        pol = Optimus(tuning=HintConfig(remaining_weight=a))
        pol.reset(topo, np.random.default_rng(0))
        pol.remaining_steps = lambda v: np.array([1e3, 1e5])  # type: ignore[method-assign]  # job 1 has 100x the work left
        got[a] = pol.allocate(view)
    # The paper's absolute drop of remaining time: the long job takes the GPUs.
    assert got[0.0][1].workers > got[0.0][0].workers
    # The drop relative to each job's remaining time: the same for two jobs of one model, whatever is left.
    assert abs(got[1.0][1].workers - got[1.0][0].workers) <= 1
    assert sum(a.workers for a in got[1.0].values()) == 8


def test_optimus_keep_s_keeps_a_running_job_unless_growing_gains_enough() -> None:
    topo = Topology.from_spec(uniform_cluster(1, 4, sockets=1))
    model = OptimusModel(topo, CATALOGUE)
    j = job(0, model="dssm", gpus=4, samples=1e7, batch=1024)
    view = make_view(topo, model, [j], placements=[Placement((0,), (0,))])
    for keep_s, want in ((0.0, 4), (1.0, 4), (1e12, 1)):
        pol = Optimus(tuning=HintConfig(keep_s=keep_s))
        pol.reset(topo, np.random.default_rng(0))
        assert pol.allocate(view)[0].workers == want, keep_s
    with pytest.raises(ValueError, match="keep_s"):
        Optimus(tuning=HintConfig(keep_s=-1.0))
    with pytest.raises(ValueError, match="worker_counts"):
        Optimus(worker_counts=[0, 2])


def test_optimus_keep_frac_keeps_a_running_job_unless_growing_saves_that_share() -> None:
    topo = Topology.from_spec(uniform_cluster(1, 4, sockets=1))
    model = OptimusModel(topo, CATALOGUE)
    j = job(0, model="dssm", gpus=4, samples=1e7, batch=1024)
    view = make_view(topo, model, [j], placements=[Placement((0,), (0,))])
    pol = Optimus()
    pol.reset(topo, np.random.default_rng(0))
    pol.observe(view)
    t1, t4 = (pol.remaining_steps(view)[0] * 1024 / model.isolated_speed(j, w, 1, 1024) for w in (1, 4))
    saved = (t1 - t4) / t1  # the share of its remaining time that growing to 4 workers saves
    assert 0 < saved < 1
    for frac, want in ((0.0, 4), (saved * 0.9, 4), (saved * 1.1, 1)):
        pol = Optimus(tuning=HintConfig(keep_frac=frac))
        pol.reset(topo, np.random.default_rng(0))
        assert pol.allocate(view)[0].workers == want, frac
    with pytest.raises(ValueError, match="keep_frac"):
        Optimus(tuning=HintConfig(keep_frac=-0.1))


def test_optimus_first_order_remaining_admits_the_shortest_job_first() -> None:
    topo = Topology.from_spec(uniform_cluster(1, 1, sockets=1))  # one GPU, two jobs
    model = OptimusModel(topo, CATALOGUE)
    jobs = [job(0, model="dssm", gpus=1, samples=1e9, batch=1024), job(1, model="dssm", gpus=1, samples=1e9, batch=1024)]
    view = make_view(topo, model, jobs)
    got = {}
    for order in ("arrival", "remaining"):
        pol = Optimus(tuning=HintConfig(first_order=order))
        pol.reset(topo, np.random.default_rng(0))
        pol.remaining_steps = lambda v: np.array([1e5, 1e3])  # type: ignore[method-assign]  # job 1 is nearly done
        got[order] = set(pol.allocate(view))
    assert got == {"arrival": {0}, "remaining": {1}}
    with pytest.raises(ValueError, match="first_order"):
        Optimus(tuning=HintConfig(first_order="size"))


def test_optimus_remaining_from_view_reads_the_predictors_remaining_work() -> None:
    topo = Topology.from_spec(uniform_cluster(1, 1, sockets=1))  # one GPU, two jobs
    model = OptimusModel(topo, CATALOGUE)
    # Job 1 has far less work left, though both have come as far: the loss-curve fit
    # (remaining = done until it has three points) cannot tell them apart, the view can.
    jobs = [job(0, model="dssm", gpus=1, samples=1e9, batch=1024), job(1, model="dssm", gpus=1, samples=2e6, batch=1024)]
    view = make_view(topo, model, jobs, progress=[1e6, 1e6])
    got = {}
    for source in ("fit", "view"):
        pol = Optimus(tuning=HintConfig(first_order="remaining", remaining_from=source))
        pol.reset(topo, np.random.default_rng(0))
        got[source] = set(pol.allocate(view))
        if source == "view":
            np.testing.assert_allclose(pol.remaining_steps(view), (np.array([1e9, 2e6]) - 1e6) / 1024)
            assert not pol.obs  # nothing observed: no fit to feed
    assert got == {"fit": {0}, "view": {1}}
    with pytest.raises(ValueError, match="remaining_from"):
        Optimus(tuning=HintConfig(remaining_from="truth"))


def test_optimus_worker_counts_keep_allocations_on_the_menu() -> None:
    topo = Topology.from_spec(uniform_cluster(2, 8, sockets=1))
    model = OptimusModel(topo, CATALOGUE)
    jobs = [job(k, model="dssm", gpus=4, samples=1e7, batch=1024) for k in range(3)]
    view = make_view(topo, model, jobs)
    free = Optimus()
    free.reset(topo, np.random.default_rng(0))
    assert {a.workers for a in free.allocate(view).values()} - {1, 2, 4, 8}  # off the menu without it
    pol = Optimus(worker_counts=[2, 4, 8])
    pol.reset(topo, np.random.default_rng(0))
    got = pol.allocate(view)
    assert {a.workers for a in got.values()} <= {1, 2, 4, 8} and len(got) == 3
    with pytest.raises(ValueError, match="remaining_weight"):
        HintConfig(remaining_weight=float("nan"))


def test_tetris_prefers_the_better_aligned_job(topo: Topology, perf: OptimusModel) -> None:
    jobs = [job(0, gpus=4), job(1, gpus=4)]
    view = make_view(topo, perf, jobs)
    cap = capacity(view)
    demand = np.array([[4, 40, 10], [4, 4, 10]], float)
    free = np.array([8, 0.5 * cap[1], 0.5 * cap[2]])
    s = Tetris().scores(view, demand, free, np.array([100.0, 100.0]))
    assert s[0] > s[1]


HEAVY = {**CATALOGUE, "heavy": replace(CATALOGUE["vgg-16"], name="heavy", theta=(0.001, 0.01, 0.8, 0.0, 0.0))}


def test_topology_placement_avoids_a_comm_heavy_neighbours_switch() -> None:
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=2)]))
    model = AnalyticModel(topo, HEAVY)
    a = Job(0, 0.0, "heavy", 1e6, 32, 1)
    b = Job(1, 0.0, "heavy", 1e6, 32, 1)
    view = make_view(topo, model, [a, b], placements=[Placement((0,), (0,)), None])
    from hrlsched.policies.base import Allocation

    pl = TopologyPlacement().place(view, {0: Allocation(1, 1), 1: Allocation(1, 1)})
    assert topo.gpu_switch[pl[1].gpus[0]] != topo.gpu_switch[0]
    # bin-packing would have put it next to job 0
    pk = make_scheduler("fifo+pack").placement.place(view, {0: Allocation(1, 1), 1: Allocation(1, 1)})
    assert topo.gpu_switch[pk[1].gpus[0]] == topo.gpu_switch[0]


FAST = ["workload.jobs=30", "workload.duration_h=2"]


@pytest.mark.parametrize("alloc", sorted(ALLOCATIONS))
def test_every_allocation_completes_default(alloc: str) -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    res = simulate(resolve_run_config("default", alloc, 0, FAST))
    assert np.all(~np.isnan(res.finish_s)) and np.all(res.rounds["gpus_busy"] <= res.n_gpus)


@pytest.mark.parametrize("place", sorted(PLACEMENTS))
def test_every_placement_completes_default(place: str) -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    res = simulate(resolve_run_config("default", f"tiresias+{place}", 0, FAST))
    assert np.all(~np.isnan(res.finish_s))


@pytest.mark.slow
@pytest.mark.parametrize("alloc", sorted(ALLOCATIONS))
@pytest.mark.parametrize("place", sorted(PLACEMENTS))
def test_full_matrix_on_default(alloc: str, place: str) -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    res = simulate(resolve_run_config("default", f"{alloc}+{place}", 0))
    assert np.all(~np.isnan(res.finish_s)) and np.all(res.rounds["gpus_busy"] <= res.n_gpus)


def test_optimus_observe_rounds_backfills_the_rounds_between_calls() -> None:
    """``observe_rounds``: a job that ran five rounds since the last call is
    observed at five steps (spread evenly up to its progress), not one; a
    call every round adds one point, as without it."""
    topo = Topology.from_spec(uniform_cluster(1, 2, sockets=1))
    model = OptimusModel(topo, CATALOGUE)
    j = job(0, model="dssm", gpus=1, samples=1e9, batch=1024)
    speed = 1024.0 * 10  # ten steps a second
    got = {}
    for obs in (False, True):
        pol = Optimus(tuning=HintConfig(observe_rounds=obs))
        pol.reset(topo, np.random.default_rng(0))
        for rounds in (5, 6):  # after five rounds, then after one more
            view = make_view(topo, model, [j], progress=[speed * 60.0 * rounds])
            pol.observe(replace(view, speed=np.array([speed]), _index={}))
        got[obs] = pol.obs[0][0]
    assert got[False] == [3000.0, 3600.0]
    np.testing.assert_allclose(got[True], [600.0, 1200.0, 1800.0, 2400.0, 3000.0, 3600.0])


def test_ps_sockets_go_round_robin_from_the_workers_sockets_to_the_least_loaded_servers() -> None:
    from hrlsched.policies.placement.occupancy import Occupancy

    topo = Topology.from_spec(uniform_cluster(3, 4, sockets=2))  # sockets 0-1 on server 0, 2-3 on 1, 4-5 on 2
    model = OptimusModel(topo, CATALOGUE)
    j = job(0, model="vgg-16", gpus=2, arch="ps")
    occ = Occupancy(make_view(topo, model, [j]))
    prof = occ.profile(j)
    wc, pc = prof.worker_cores, prof.ps_cores
    workers = np.array([0, 1])  # both on socket 0 of server 0
    # Server 0 keeps room for one PS besides the workers; server 2 has more room than server 1.
    occ.cores_free[:] = [2 * wc + pc, 10 * pc, 20 * pc]
    occ.mem_free[:] = 1e6
    assert occ.ps_sockets_for(j, 1, workers) == (0,)  # the workers' socket first
    # then, in the same pass, every other socket with room, the least-loaded server's first;
    # then round-robin again over the same order
    assert occ.ps_sockets_for(j, 5, workers) == (0, 4, 5, 2, 3)
    assert occ.ps_sockets_for(j, 6, workers) == (0, 4, 5, 2, 3, 4)
    occ.cores_free[:] = [2 * wc + pc, 0.0, 0.0]
    assert occ.ps_sockets_for(j, 2, workers) is None  # room for one PS only
    assert occ.ps_sockets_for(j, 0, workers) == ()


@pytest.mark.parametrize("noisy", [False, True])
def test_optimus_keeps_speeds_per_model_unless_the_predictor_is_per_job(noisy: bool) -> None:
    """Optimus's predicted speeds are kept per model where the predictor's
    speeds depend on a job only through its model (jobs of one model price
    it once), per job under a noisy predictor; the allocations are those of
    speeds kept per job."""
    from hrlsched.sim.predictor import NoisyPredictor

    topo = Topology.from_spec(uniform_cluster(2, 4, sockets=1))
    base = OptimusModel(topo, CATALOGUE)
    jobs = [job(i, model="dssm" if i % 2 else "vgg-16", gpus=1, samples=1e7, batch=256) for i in range(6)]
    perf = NoisyPredictor(base, {j.job_id: 1.0 + 0.1 * j.job_id for j in jobs}) if noisy else base
    got = {}
    for per_model in ((False,) if noisy else (True, False)):
        pol = Optimus()
        pol.reset(topo, np.random.default_rng(0))
        if not per_model:  # as before: every speed kept per job
            perf = NoisyPredictor(base, {}) if not noisy else perf
        got[per_model] = pol.allocate(make_view(topo, perf, jobs))
        who = {k[0] for k in pol._speeds}
        assert who == ({j.job_id for j in jobs} if not per_model else {"dssm", "vgg-16"})
    if not noisy:
        assert got[True] == got[False]
