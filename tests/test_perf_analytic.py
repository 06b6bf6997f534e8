from dataclasses import replace

import numpy as np
import pytest

from hrlsched.cluster import ClusterSpec, Placement, ServerGroupSpec, Topology
from hrlsched.core import CATALOGUE, Job
from hrlsched.perf import analytic
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.perf.optimus import optimus_speed

# 4 servers of 8 GPUs: 2 sockets x 2 switches x 2 GPUs; 2 racks.
SPEC = ClusterSpec(server_groups=[ServerGroupSpec(count=4)], racks=2)
TOPO = Topology.from_spec(SPEC)


def mk(i: int, model: str, w: int, arch: str = "ps", mode: str = "sync") -> Job:
    return Job(i, 0.0, model, 1e6, CATALOGUE.get(model, CATALOGUE["vgg-16"]).default_batch * (w if mode == "sync" else 1), w, 1, arch=arch, mode=mode)


@pytest.fixture
def model() -> AnalyticModel:
    return AnalyticModel(TOPO, CATALOGUE)


def test_placement_order_switch_socket_server(model: AnalyticModel) -> None:
    j = mk(0, "vgg-16", 2, arch="allreduce")
    one_switch, two_sockets, two_servers = (model.speeds([j], [Placement(g)])[0] for g in ((0, 1), (0, 4), (0, 8)))
    assert one_switch > two_sockets > two_servers
    assert two_sockets / one_switch < 0.99 and two_servers / two_sockets < 0.9


# A communication-heavy profile: transfers take most of an iteration.
HEAVY = {**CATALOGUE, "heavy": replace(CATALOGUE["vgg-16"], name="heavy", theta=(0.001, 0.01, 0.8, 0.0, 0.0))}


def test_comm_heavy_jobs_under_one_switch_slow_each_other() -> None:
    model = AnalyticModel(TOPO, HEAVY)
    a, b = mk(0, "heavy", 1), mk(1, "heavy", 1)
    alone = model.speeds([a], [Placement((0,), (0,))])[0]
    same_switch = model.speeds([a, b], [Placement((0,), (0,)), Placement((1,), (0,))])[0]
    other_switch = model.speeds([a, b], [Placement((0,), (0,)), Placement((2,), (0,))])[0]
    assert same_switch < other_switch <= alone
    assert same_switch / alone < 0.95


def test_compute_bound_job_barely_notices() -> None:
    model = AnalyticModel(TOPO, HEAVY)
    heavy = mk(1, "heavy", 1)
    comp = mk(0, "dssm", 1)
    vgg0 = mk(0, "heavy", 1)
    pl0, pl1 = Placement((0,), (0,)), Placement((1,), (0,))
    comp_slow = model.speeds([comp, heavy], [pl0, pl1])[0] / model.speeds([comp], [pl0])[0]
    heavy_slow = model.speeds([vgg0, heavy], [pl0, pl1])[0] / model.speeds([vgg0], [pl0])[0]
    assert 1 - comp_slow < 0.12
    assert 1 - comp_slow < (1 - heavy_slow) / 2


def test_ps_on_the_other_socket_costs_qpi(model: AnalyticModel) -> None:
    j = mk(0, "vgg-16", 2)
    near, far = Placement((0, 1), (0,)), Placement((0, 1), (1,))
    qpi = model.off_qpi + 0
    links_near, _ = model.traffic(j, near, j.batch_size)
    links_far, bytes_far = model.traffic(j, far, j.batch_size)
    assert qpi not in links_near and qpi in links_far
    assert bytes_far[list(links_far).index(qpi)] > 0
    assert model.speeds([j], [far])[0] < model.speeds([j], [near])[0]


def test_one_job_on_a_uniform_network_reduces_to_optimus() -> None:
    bw = 25.0
    spec = ClusterSpec(server_groups=[ServerGroupSpec(count=12, sockets=1, switches_per_socket=1, gpus_per_switch=1,
                                                      nic_gbps=bw, qpi_gbps=bw, pcie_gbps=bw, switch_uplink_gbps=bw)])
    topo = Topology.from_spec(spec)
    cat = {k: replace(v, input_mb_per_sample=0.0, compute_sensitivity=0.0) for k, v in CATALOGUE.items()}
    m = AnalyticModel(topo, cat, ref_gbps=bw)
    for name in ("resnet-50", "vgg-16", "inception-bn"):
        for w, p in ((2, 1), (4, 2), (6, 3), (8, 2), (3, 3)):
            j = Job(0, 0.0, name, 1e6, 64, w, p)
            pl = Placement(tuple(range(w)), tuple(range(w, w + p)))  # PSs on servers of their own
            expect = optimus_speed(np.array(cat[name].theta), np.array([64.0]), np.array([w]), np.array([p]))[0]
            assert m.speeds([j], [pl])[0] == pytest.approx(expect, rel=1e-9), (name, w, p)


def test_async_job_sums_its_workers(model: AnalyticModel) -> None:
    j = mk(0, "resnet-50", 2, mode="async")
    one = model.speeds([mk(0, "resnet-50", 1, mode="async")], [Placement((0,), (0,))])[0]
    two = model.speeds([j], [Placement((0, 2), (0,))])[0]
    assert one < two <= 2 * one


def test_slowest_gpu_paces_a_sync_job() -> None:
    spec = ClusterSpec(server_groups=[ServerGroupSpec(count=1, gpu_type="V100"), ServerGroupSpec(count=1, gpu_type="K80")])
    topo = Topology.from_spec(spec)
    m = AnalyticModel(topo, CATALOGUE)
    j = mk(0, "dssm", 2)
    # Which server is faster depends on the model (Topology.type_speed): with
    # Gavel's data dssm runs faster on a K80 than on a V100, without it slower.
    sp = topo.model_gpu_speed("dssm")
    f, s = (0, 8) if sp[0] > sp[8] else (8, 0)
    fast = m.speeds([j], [Placement((f, f + 1), (f // 4,))])[0]
    mixed = m.speeds([j], [Placement((0, 8), (0,))])[0]
    slow = m.speeds([j], [Placement((s, s + 1), (s // 4,))])[0]
    assert fast > mixed >= slow * 0.99


def test_traffic_is_cached_per_placement(model: AnalyticModel) -> None:
    j = mk(0, "vgg-16", 2)
    pl = Placement((0, 1), (0,))
    a = model.traffic(j, pl, j.batch_size)
    assert model.traffic(j, pl, j.batch_size) is a


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="ref_gbps"):
        AnalyticModel(TOPO, CATALOGUE, ref_gbps=0)
    with pytest.raises(ValueError, match="intra_server_bytes"):
        AnalyticModel(TOPO, CATALOGUE, intra_server_bytes="bytes")
    with pytest.raises(ValueError, match="ring_spread_eff"):
        AnalyticModel(TOPO, CATALOGUE, ring_spread_eff=0.0)
    with pytest.raises(ValueError, match="pressure_from: expected one of tasks, own, workers, got 'ps'"):
        AnalyticModel(TOPO, CATALOGUE, pressure_from="ps")


def test_pressure_from_counts_the_tasks_it_names() -> None:
    """``tasks`` (the model): every other task on a worker's socket slows it;
    ``own``: only its job's; ``workers``: only workers, of any job."""
    a, b = mk(0, "resnet-50", 2), mk(1, "resnet-50", 1)
    # a's workers and its PS on socket 0 (GPUs 0-3); b's worker on socket 0, its PS on socket 1
    jobs, pls = [a, b], [Placement((0, 1), (0,)), Placement((2,), (1,))]
    speed = {m: AnalyticModel(TOPO, CATALOGUE, pressure_from=m).speeds(jobs, pls)[0] for m in ("tasks", "own", "workers")}
    alone = {m: AnalyticModel(TOPO, CATALOGUE, pressure_from=m).speeds([a], pls[:1])[0] for m in ("tasks", "own", "workers")}
    assert speed["tasks"] < speed["workers"] < alone["workers"]  # b's worker presses under both
    assert speed["own"] == alone["own"] == alone["tasks"]  # b costs a nothing; a alone counts its PS
    assert alone["workers"] > alone["tasks"]  # its own PS no longer presses


def test_params_bytes_inside_a_server_theta2_bytes_over_the_network() -> None:
    m = AnalyticModel(TOPO, CATALOGUE, intra_server_bytes="params")
    prof = CATALOGUE["vgg-16"]
    S, P = prof.theta[2] * m.ref_bytes_s, prof.params_mb * 1e6
    j = mk(0, "vgg-16", 1)
    row = dict(zip(*m.traffic(j, Placement((0,), (4,)), j.batch_size)))  # PS on server 2 (socket 4)
    assert row[0] == pytest.approx(P)  # GPU 0's PCIe link, push
    assert row[m.off_nic + 0] == pytest.approx(S)  # server 0's NIC, outgoing


def test_contention_gain_scales_the_mutual_slowdown() -> None:
    a, b = mk(0, "heavy", 1), mk(1, "heavy", 1)
    pls = [Placement((0,), (0,)), Placement((1,), (0,))]
    ratio = {}
    for k in (0.0, 1.0, 2.0):
        m = AnalyticModel(TOPO, HEAVY, contention=k)
        ratio[k] = m.speeds([a, b], pls)[0] / m.speeds([a], pls[:1])[0]
    assert ratio[2.0] < ratio[1.0] < ratio[0.0] <= 1.0
    with pytest.raises(ValueError, match="contention"):
        AnalyticModel(TOPO, CATALOGUE, contention=-0.5)


def reference_traffic(m: AnalyticModel, job: Job, pl: Placement, batch: int) -> dict[int, float]:
    """The routing rules written out one path at a time (the vectorised
    builder must give the same (directed link, bytes) rows)."""
    t, prof, D = m.topology, m.profile(job), m.n_links

    def path(a: int, b_socket: int, b_gpu: int | None) -> list[int]:
        """Source-side links outgoing (id), destination-side incoming (id + D)."""
        sa, links = int(t.gpu_socket[a]), [a]
        if b_gpu is not None:
            va, vb = int(t.gpu_server[a]), int(t.gpu_server[b_gpu])
            if va == vb and t.nvlink_gbps[va] > 0:
                return [m.off_nvl + va]
            links.append(D + b_gpu)
            if t.gpu_switch[a] == t.gpu_switch[b_gpu]:
                return links
            links += [m.off_switch + int(t.gpu_switch[a]), D + m.off_switch + int(t.gpu_switch[b_gpu])]
            b_socket = int(t.gpu_socket[b_gpu])
        else:
            links.append(m.off_switch + int(t.gpu_switch[a]))
        if sa == b_socket:
            return links
        va, vb = int(t.socket_server[sa]), int(t.socket_server[b_socket])
        if va == vb:
            return links + [m.off_qpi + va + (0 if sa < b_socket else D)]
        links += [m.off_nic + va, D + m.off_nic + vb]
        ra, rb = int(t.server_rack[va]), int(t.server_rack[vb])
        return links + ([m.off_rack + ra, D + m.off_rack + rb] if ra != rb else [])

    def back(links: list[int]) -> list[int]:
        return [(x + D) % (2 * D) for x in links]

    acc: dict[int, float] = {}

    def add(links: list[int], nbytes: float) -> None:
        for link in links:
            acc[link] = acc.get(link, 0.0) + nbytes

    w, S = pl.n_workers, prof.theta[2] * m.ref_bytes_s
    gpus = sorted(pl.gpus)
    if job.arch == "ps" and pl.n_ps:
        for g in gpus:
            for k in pl.ps_sockets:
                add(path(g, k, None), S / pl.n_ps)  # push
                add(back(path(g, k, None)), S / pl.n_ps)  # pull
    elif job.arch == "allreduce" and w > 1:
        for a, b in zip(gpus, gpus[1:] + gpus[:1]):
            add(path(a, -1, b), 2.0 * (w - 1) / w * S)
    socks = [int(t.gpu_socket[g]) for g in gpus] + list(pl.ps_sockets)
    home = {}
    for v in {int(t.socket_server[s]) for s in socks}:
        here = [s for s in socks if t.socket_server[s] == v]
        home[v] = max(sorted(set(here)), key=here.count)
    inp = (batch / w if job.mode == "sync" else batch) * prof.input_mb_per_sample * 1e6
    if inp > 0:
        for g in gpus:
            add(back(path(g, home[int(t.gpu_server[g])], None)), inp)  # host -> GPU
    return acc


def test_vectorised_traffic_matches_the_routing_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    spec = ClusterSpec(server_groups=[ServerGroupSpec(count=3), ServerGroupSpec(count=2, nvlink_gbps=300.0)], racks=2)
    topo = Topology.from_spec(spec)
    m = AnalyticModel(topo, CATALOGUE)
    jobs, pls = [], []
    for i in range(60):
        w = int(rng.integers(1, 9))
        arch = "ps" if i % 2 else "allreduce"
        gpus = tuple(int(g) for g in rng.choice(topo.n_gpus, w, replace=False))
        ps = tuple(int(s) for s in rng.integers(0, topo.n_sockets, int(rng.integers(1, 4)))) if arch == "ps" else ()
        mode = "async" if i % 5 == 0 else "sync"
        jobs.append(mk(i, str(rng.choice(["vgg-16", "resnet-50", "dssm"])), w, arch=arch, mode=mode))
        pls.append(Placement(gpus, ps))
    batch = np.array([j.batch_size for j in jobs])
    rows = m._build_traffic(jobs, pls, batch)  # all at once, as speeds() does
    for j, pl, b, (links, nbytes) in zip(jobs, pls, batch, rows):
        ref = reference_traffic(m, j, pl, int(b))
        assert sorted(links.tolist()) == sorted(ref), (j.job_id, pl)
        np.testing.assert_allclose([dict(zip(links.tolist(), nbytes))[k] for k in sorted(ref)],
                                   [ref[k] for k in sorted(ref)], rtol=1e-12)
    # The routes read from the per-topology table and summed with a dense bincount are, to the
    # bit, those routed path by path and summed with np.unique (large topologies, many jobs).
    monkeypatch.setattr(analytic, "_ROUTE_TABLE_MAX", 0)
    monkeypatch.setattr(analytic, "_DENSE_KEYS_MAX", 0)
    for (links, nbytes), (l0, b0) in zip(rows, AnalyticModel(topo, CATALOGUE)._build_traffic(jobs, pls, batch)):
        assert np.array_equal(links, l0) and np.array_equal(nbytes, b0)


@pytest.mark.parametrize("options", [{}, {"intra_server_bytes": "params", "ring_spread_eff": 0.63, "host_staging": 0.1}])
def test_traffic_of_many_jobs_is_each_jobs_own_to_the_bit(options: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build of many jobs at once (a first decision point) gives each job
    exactly the rows of its one-job build (a job that moved), whether the
    routes come from the table or are routed path by path."""
    spec = ClusterSpec(server_groups=[ServerGroupSpec(count=3), ServerGroupSpec(count=2, nvlink_gbps=300.0)], racks=2)
    topo = Topology.from_spec(spec)
    rng = np.random.default_rng(7)
    jobs, pls = [], []
    for i in range(40):
        w = int(rng.integers(1, 9))
        arch = "ps" if i % 2 else "allreduce"
        gpus = tuple(int(g) for g in rng.choice(topo.n_gpus, w, replace=False))
        ps = tuple(int(s) for s in rng.integers(0, topo.n_sockets, int(rng.integers(1, 4)))) if arch == "ps" else ()
        jobs.append(mk(i, str(rng.choice(["vgg-16", "resnet-50", "dssm"])), w, arch=arch, mode="async" if i % 6 == 1 else "sync"))
        pls.append(Placement(gpus, ps))
    batch = np.array([j.batch_size for j in jobs])
    m = AnalyticModel(topo, CATALOGUE, **options)
    together = m._build_traffic(jobs, pls, batch)
    for i, (links, nbytes) in enumerate(together):
        (l1, b1), = m._build_traffic(jobs[i:i + 1], pls[i:i + 1], batch[i:i + 1])
        assert np.array_equal(links, l1) and nbytes.tobytes() == b1.tobytes()
    monkeypatch.setattr(analytic, "_ROUTE_TABLE_MAX", 0)
    for (links, nbytes), (l0, b0) in zip(together, AnalyticModel(topo, CATALOGUE, **options)._build_traffic(jobs, pls, batch)):
        assert np.array_equal(links, l0) and nbytes.tobytes() == b0.tobytes()


def test_links_are_full_duplex(model: AnalyticModel) -> None:
    j = mk(0, "vgg-16", 2, arch="allreduce")
    links, nbytes = model.traffic(j, Placement((0, 8)), j.batch_size)  # one GPU on each of two servers
    row = dict(zip(links.tolist(), nbytes))
    S = CATALOGUE["vgg-16"].theta[2] * model.ref_bytes_s
    out_a, in_a = model.off_nic + 0, model.n_links + model.off_nic + 0
    assert row[out_a] == pytest.approx(S) and row[in_a] == pytest.approx(S)  # one ring edge each way


def test_input_pipeline_crosses_qpi_from_the_jobs_cpu_home() -> None:
    cat = {"inp": replace(CATALOGUE["resnet-50"], name="inp", theta=(0.004, 0.1, 0.0, 0.0, 0.0), input_mb_per_sample=1.0,
                          compute_sensitivity=0.0)}  # QPI alone: the own PSs on socket 0 press on compute too
    m = AnalyticModel(TOPO, cat)
    j = Job(0, 0.0, "inp", 1e6, 32, 1, 2)
    qpi = {m.off_qpi, m.off_qpi + m.n_links}  # server 0, both directions
    home_here = dict(zip(*m.traffic(j, Placement((0,), (0,)), 32)))  # worker and PSs on socket 0
    home_there = dict(zip(*m.traffic(j, Placement((0,), (1, 1)), 32)))  # CPU side on socket 1
    assert not qpi & set(home_here)
    assert sum(home_there[k] for k in qpi & set(home_there)) == pytest.approx(32 * 1e6)
    assert m.speeds([j], [Placement((0,), (1, 1))])[0] < m.speeds([j], [Placement((0,), (0, 0))])[0]


def test_time_shared_gpu_divides_compute(model: AnalyticModel) -> None:
    a, b = mk(0, "dssm", 1), mk(1, "dssm", 1)
    alone = model.speeds([a], [Placement((0,), (0,))])[0]
    shared = model.speeds([a, b], [Placement((0,), (0,)), Placement((0,), (0,))])[0]
    prof = CATALOGUE["dssm"]
    t_alone = a.batch_size / alone
    # the compute term doubles (plus the socket pressure of the other job's tasks)
    assert a.batch_size / shared - t_alone >= prof.theta[0] * a.batch_size * 0.999


@pytest.mark.parametrize("options", [{}, {"intra_server_bytes": "params", "ring_spread_eff": 0.63, "host_staging": 0.1,
                                          "straggler": 0.05}, {"pressure_from": "own"}, {"pressure_from": "workers"}])
def test_isolated_solve_is_each_job_alone_to_the_bit(options: dict) -> None:
    """``isolated_is_alone``: the engine computes the alone speeds of many
    jobs in one isolated solve; each must equal the job's one-job solve exactly
    (NVLink, PS and ring jobs, sync and async, spread over servers and racks)."""
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=4, nvlink_gbps=300.0)], racks=2))
    model = AnalyticModel(topo, CATALOGUE, **options)
    assert model.isolated_is_alone
    rng = np.random.default_rng(0)
    jobs, pls = [], []
    for i in range(300):
        arch = "allreduce" if rng.random() < 0.4 else "ps"
        mode = "async" if arch == "ps" and rng.random() < 0.3 else "sync"
        w = int(rng.choice([1, 2, 3, 4, 8, 16]))
        p = int(rng.integers(1, 5)) if arch == "ps" else 0
        gpus = rng.choice(topo.n_gpus, w, replace=False) if rng.random() < 0.5 else np.arange(w) + 8 * rng.integers(2)
        jobs.append(mk(i, str(rng.choice(sorted(CATALOGUE))), w, arch=arch, mode=mode))
        pls.append(Placement.of(gpus, rng.integers(topo.n_sockets, size=p)))
    batch = np.array([j.batch_size for j in jobs])
    together = model.isolated_speeds(jobs, pls, batch)
    one_by_one = [model._solve([j], [pl], np.array([b]), isolated=False)[0] for j, pl, b in zip(jobs, pls, batch)]
    assert together.tolist() == one_by_one
    fresh = AnalyticModel(topo, CATALOGUE, **options)
    assert fresh.alone_speeds(jobs, pls, batch).tolist() == [model.alone_speed(j, pl, int(b))
                                                            for j, pl, b in zip(jobs, pls, batch)]


@pytest.mark.parametrize("options", [{}, {"intra_server_bytes": "params", "ring_spread_eff": 0.63, "host_staging": 0.1,
                                          "straggler": 0.05}, {"pressure_from": "own"}, {"pressure_from": "workers"}])
def test_speeds_with_alone_speeds_in_one_pass_are_each_to_the_bit(options: dict) -> None:
    """``speeds_and_alone`` (the engine's call after jobs move: the moved
    jobs' alone speeds solved in the joint pass, each on a cluster of its
    own) gives exactly ``speeds`` and the one-job solves, and keeps them as
    ``alone_speeds`` would."""
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=4, nvlink_gbps=300.0)], racks=2))
    rng = np.random.default_rng(1)
    for trial in range(20):
        jobs, pls = [], []
        free = [int(g) for g in rng.permutation(topo.n_gpus)]
        for i in range(int(rng.integers(1, 12))):
            arch = "allreduce" if rng.random() < 0.4 else "ps"
            mode = "async" if arch == "ps" and rng.random() < 0.3 else "sync"
            w = min(int(rng.choice([1, 2, 3, 4, 8])), len(free))
            if w == 0:
                break
            gpus, free = free[:w], free[w:]
            jobs.append(mk(i, str(rng.choice(sorted(CATALOGUE))), w, arch=arch, mode=mode))
            pls.append(Placement.of(sorted(gpus), rng.integers(topo.n_sockets, size=int(rng.integers(1, 4))) if arch == "ps" else ()))
        batch = np.array([j.batch_size for j in jobs])
        alone = sorted(set(rng.integers(len(jobs), size=int(rng.integers(1, 6))).tolist()))  # (over 3: apart)
        model, ref = AnalyticModel(topo, CATALOGUE, **options), AnalyticModel(topo, CATALOGUE, **options)
        sp, al = model.speeds_and_alone(jobs, pls, batch, alone)
        assert sp.tolist() == ref.speeds(jobs, pls, batch).tolist(), trial
        want = [ref._solve([jobs[i]], [pls[i]], batch[[i]], isolated=True)[0] for i in alone]
        assert al.tolist() == want, trial
        assert model.alone_speeds([jobs[i] for i in alone], [pls[i] for i in alone], batch[alone]).tolist() == want


@pytest.mark.parametrize("options", [{}, {"intra_server_bytes": "params", "ring_spread_eff": 0.63, "host_staging": 0.1,
                                          "straggler": 0.05}, {"pressure_from": "own"}, {"pressure_from": "workers"}])
def test_groups_solved_apart_in_one_pass_are_each_groups_own_solve_to_the_bit(options: dict) -> None:
    """``speeds_apart`` (the learned placement's candidates, each with the
    same neighbours): one solve of the groups on copies of the cluster gives
    each group's own ``speeds`` exactly, groups that share GPUs, sockets and
    links with one another and an empty group included; the base class's
    loop and the noisy predictor give the same."""
    from hrlsched.perf.base import PerformanceModel
    from hrlsched.sim.predictor import NoisyPredictor

    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=4, nvlink_gbps=300.0)], racks=2))
    rng = np.random.default_rng(2)
    for trial in range(20):
        groups = []
        for _ in range(int(rng.integers(1, 6))):
            jobs, pls = [], []
            for i in range(int(rng.integers(0 if not groups else 1, 8))):
                arch = "allreduce" if rng.random() < 0.4 else "ps"
                mode = "async" if arch == "ps" and rng.random() < 0.3 else "sync"
                w = int(rng.choice([1, 2, 3, 4, 8]))
                jobs.append(mk(i, str(rng.choice(sorted(CATALOGUE))), w, arch=arch, mode=mode))
                ps = rng.integers(topo.n_sockets, size=int(rng.integers(1, 4))) if arch == "ps" else ()
                pls.append(Placement.of(sorted(rng.choice(topo.n_gpus, w, replace=False).tolist()), ps))
            groups.append((jobs, pls))
        model, ref = AnalyticModel(topo, CATALOGUE, **options), AnalyticModel(topo, CATALOGUE, **options)
        got = model.speeds_apart(groups)
        want = [ref.speeds(j, p) for j, p in groups]
        assert [g.tolist() for g in got] == [w.tolist() for w in want], trial
        assert [g.tolist() for g in PerformanceModel.speeds_apart(ref, groups)] == [w.tolist() for w in want]
        noisy = NoisyPredictor(model, {0: 1.3, 2: 0.7})
        assert [g.tolist() for g in noisy.speeds_apart(groups)] == [noisy.speeds(j, p).tolist() for j, p in groups]


def test_pushes_of_jobs_with_many_ps_pairs_made_with_numpy_are_the_python_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job with more than ``_PAIRS_IN_PYTHON`` (worker, PS) pairs has its
    push paths made with numpy, after the other jobs'; its rows and every
    other job's are, to the bit, those of the Python lists, together and alone."""
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=5)], racks=2))
    rng = np.random.default_rng(3)
    jobs, pls = [], []
    for i in range(12):
        big = i % 3 == 0
        w = 16 if big else int(rng.integers(1, 5))
        p = 8 if big else int(rng.integers(1, 3))
        gpus = tuple(int(g) for g in rng.choice(topo.n_gpus, w, replace=False))
        ps = tuple(int(s) for s in rng.integers(0, topo.n_sockets, p))
        jobs.append(mk(i, str(rng.choice(["vgg-16", "resnet-50", "dssm"])), w, arch="ps"))
        pls.append(Placement(gpus, ps))
    assert 16 * 8 > analytic._PAIRS_IN_PYTHON
    batch = np.array([j.batch_size for j in jobs])
    m = AnalyticModel(topo, CATALOGUE)
    together = m._build_traffic(jobs, pls, batch)
    monkeypatch.setattr(analytic, "_PAIRS_IN_PYTHON", 1 << 30)  # every push a Python int
    lists = AnalyticModel(topo, CATALOGUE)._build_traffic(jobs, pls, batch)
    for i, ((links, nbytes), (l0, b0)) in enumerate(zip(together, lists)):
        assert np.array_equal(links, l0) and nbytes.tobytes() == b0.tobytes()
        (l1, b1), = AnalyticModel(topo, CATALOGUE)._build_traffic(jobs[i:i + 1], pls[i:i + 1], batch[i:i + 1])
        assert np.array_equal(links, l1) and nbytes.tobytes() == b1.tobytes()


@pytest.mark.parametrize("options", [{}, {"intra_server_bytes": "params", "ring_spread_eff": 0.63, "host_staging": 0.1}])
def test_jobs_on_one_placement_share_its_routing_and_keep_their_own_bytes(options: dict) -> None:
    """Jobs of different models on the same placement are routed once (one
    ``_Routed`` per placement and kinds of traffic); each one's rows are, to
    the bit, those of its build alone in a fresh model."""
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=3)], racks=2))
    pl_ps = Placement((0, 1, 9, 17), (0, 3))
    pl_ar = Placement((2, 3, 10))
    jobs = [mk(i, model, len(pl.gpus), arch=arch) for i, (model, pl, arch) in enumerate(
        [("vgg-16", pl_ps, "ps"), ("resnet-50", pl_ps, "ps"), ("dssm", pl_ps, "ps"),
         ("vgg-16", pl_ar, "allreduce"), ("resnet-50", pl_ar, "allreduce")])]
    pls = [pl_ps, pl_ps, pl_ps, pl_ar, pl_ar]
    batch = np.array([j.batch_size for j in jobs])
    m = AnalyticModel(topo, CATALOGUE, **options)
    together = m._build_traffic(jobs, pls, batch)
    assert len(m._routed) < len(jobs)  # per placement and kinds of traffic (input reads or not), not per job
    for i, (links, nbytes) in enumerate(together):
        (l1, b1), = AnalyticModel(topo, CATALOGUE, **options)._build_traffic(jobs[i:i + 1], pls[i:i + 1], batch[i:i + 1])
        assert np.array_equal(links, l1) and nbytes.tobytes() == b1.tobytes()


def test_alone_task_counts_of_large_jobs_are_their_sockets_tasks() -> None:
    """A worker's tasks on its socket alone (the job's workers and PSs there),
    counted per socket for a large job, are the direct counts."""
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=5)], racks=2))
    rng = np.random.default_rng(5)
    m = AnalyticModel(topo, CATALOGUE)
    for i, w in enumerate((3, 9, 16, 32)):
        gpus = tuple(int(g) for g in rng.choice(topo.n_gpus, w, replace=False))
        ps = tuple(int(s) for s in rng.integers(0, topo.n_sockets, int(rng.integers(1, 9))))
        job = mk(i, "vgg-16", w, arch="ps")
        (terms,) = m._build_terms([job], [Placement(gpus, ps)], np.array([job.batch_size]))
        socks = [int(topo.gpu_socket[g]) for g in gpus]
        assert terms.per_w[5].tolist() == [float(socks.count(s) + ps.count(s)) for s in socks]
