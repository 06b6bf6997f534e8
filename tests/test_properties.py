"""Property tests over random workloads and random (also invalid) decisions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hrlsched.cluster import Placement, Topology
from hrlsched.core import CATALOGUE, Job
from hrlsched.perf import OptimusModel
from hrlsched.policies import make_scheduler
from hrlsched.sim import EngineConfig, InvalidDecisionError, Simulator
from tests.conftest import small_spec
from tests.helpers import Scripted

TOPO = Topology.from_spec(small_spec(servers=2))
PERF = OptimusModel(TOPO, CATALOGUE)
MODELS = sorted(CATALOGUE)
ENG = EngineConfig(round_s=60.0)

job_st = st.tuples(
    st.floats(0, 4000),  # arrival
    st.sampled_from(MODELS),
    st.floats(1e2, 2e5),  # samples
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.sampled_from(["ps", "allreduce"]),
    st.sampled_from(["sync", "async"]),
)


def make_jobs(specs) -> list[Job]:
    return [
        Job(job_id=i, arrival_s=a, model=m, total_samples=s, batch_size=CATALOGUE[m].default_batch,
            requested_gpus=g, arch="ps" if mode == "async" else arch, mode=mode)  # no async all-reduce
        for i, (a, m, s, g, arch, mode) in enumerate(specs)
    ]


@settings(max_examples=40, deadline=None)
@given(st.lists(job_st, min_size=1, max_size=25))
def test_fifo_completes_every_job_and_conserves_work(specs) -> None:
    jobs = make_jobs(specs)
    res = Simulator(TOPO, jobs, PERF, make_scheduler("fifo"), ENG).run()
    assert np.all(~np.isnan(res.finish_s)), "every job completes under FIFO"
    assert np.all(res.rounds["gpus_busy"] <= TOPO.n_gpus)
    arrival = np.array([j.arrival_s for j in res.jobs])
    assert np.all(res.start_s >= arrival - 1e-9)
    assert np.all(res.finish_s >= res.start_s)
    total = np.array([j.total_samples for j in res.jobs])
    np.testing.assert_allclose(res.progress, total)
    # FIFO never moves a job, and the Optimus backend has no interference, so
    # each job runs at one speed: work = speed x (running time - restart delay).
    for j, prod, hold in zip(res.jobs, res.productive_s, res.hold_s):
        pl = PERF.compact_placement(j.requested_gpus, j.num_ps_requested)
        full = Placement(tuple(range(j.requested_gpus)), pl.ps_sockets)
        rate = PERF.alone_speed(j, full) * PERF.efficiency([j], [full], np.array([j.batch_size]), np.zeros(1))[0]
        assert prod * rate == pytest.approx(j.total_samples, rel=1e-6)
        assert hold - prod == pytest.approx(CATALOGUE[j.model].restart_s, abs=1e-6)


def oracle_error(view, placements: dict[int, Placement], max_share: int) -> str | None:
    """An independent, loop-by-loop check of a decision."""
    topo = view.topology
    active = {j.job_id: j for j in view.jobs}
    gpu_count = np.zeros(topo.n_gpus, int)
    cores = np.zeros(topo.n_servers)
    mem = np.zeros(topo.n_servers)
    for jid, pl in placements.items():
        if jid not in active:
            return "not active"
        j = active[jid]
        prof = CATALOGUE[j.model]
        if not pl.gpus or len(set(pl.gpus)) != len(pl.gpus):
            return "workers"
        if any(g < 0 or g >= topo.n_gpus for g in pl.gpus):
            return "range"
        if j.arch == "ps" and (not pl.ps_sockets or any(s < 0 or s >= topo.n_sockets for s in pl.ps_sockets)):
            return "ps"
        if j.arch == "allreduce" and pl.ps_sockets:
            return "ps"
        for g in pl.gpus:
            gpu_count[g] += 1
            cores[topo.gpu_server[g]] += prof.worker_cores
            mem[topo.gpu_server[g]] += prof.worker_mem_gb
        for s in pl.ps_sockets:
            cores[topo.socket_server[s]] += prof.ps_cores
            mem[topo.socket_server[s]] += prof.ps_mem_gb
    if (gpu_count > max_share).any():
        return "share"
    if (cores > topo.server_cores + 1e-9).any() or (mem > topo.server_mem_gb + 1e-9).any():
        return "capacity"
    return None


class RandomDecider:
    """Random placements, valid or not; records what the oracle said."""

    def __init__(self, seed: int, p_bad: float, max_share: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.p_bad = p_bad
        self.max_share = max_share
        self.verdicts: list[str | None] = []
        self.ever_ran: set[int] = set()

    def __call__(self, view):
        rng, topo = self.rng, view.topology
        out: dict[int, Placement] = {}
        free = list(rng.permutation(topo.n_gpus))
        for j in view.jobs:
            if rng.random() < 0.3:
                continue
            n = int(rng.integers(1, 4))
            if rng.random() < self.p_bad:
                gpus = tuple(int(g) for g in rng.integers(-1, topo.n_gpus + 1, size=n))
            else:
                if len(free) < n:
                    continue
                gpus = tuple(int(free.pop()) for _ in range(n))
            nps = int(rng.integers(0, 3)) if rng.random() < self.p_bad else (1 if j.arch == "ps" else 0)
            ps = tuple(int(s) for s in rng.integers(0, topo.n_sockets, size=nps))
            out[j.job_id] = Placement(gpus, ps)
        if rng.random() < self.p_bad / 4:
            out[10_000] = Placement((0,), (0,))
        self.verdicts.append(oracle_error(view, out, self.max_share))
        self.ever_ran |= {jid for jid in out}
        return out


@settings(max_examples=40, deadline=None)
@given(st.lists(job_st, min_size=1, max_size=12), st.integers(0, 2**31), st.sampled_from([0.0, 0.05, 0.3]),
       st.sampled_from([1, 2]))
def test_random_decisions_are_accepted_iff_valid(specs, seed, p_bad, max_share) -> None:
    jobs = make_jobs(specs)
    decider = RandomDecider(seed, p_bad, max_share)
    sim = Simulator(TOPO, jobs, PERF, Scripted(decider, max_tasks_per_gpu=max_share),
                    EngineConfig(round_s=60.0, max_time_s=4 * 3600.0))
    try:
        res = sim.run()
    except InvalidDecisionError:
        assert decider.verdicts[-1] is not None, "engine rejected a valid decision"
        assert all(v is None for v in decider.verdicts[:-1])
        return
    assert all(v is None for v in decider.verdicts), "engine accepted an invalid decision"
    assert np.all(res.rounds["gpus_busy"] <= TOPO.n_gpus)
    # No progress without resources.
    never = [i for i, j in enumerate(res.jobs) if j.job_id not in decider.ever_ran]
    assert np.all(res.progress[never] == 0)
    assert np.all(res.gpu_seconds[never] == 0)
    assert np.all(res.progress <= np.array([j.total_samples for j in res.jobs]) + 1e-6)
