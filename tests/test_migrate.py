"""``migrate``: pack, then scattered jobs moved onto fewer servers."""

import numpy as np
import pytest

from hrlsched.cluster import Placement, Topology, uniform_cluster
from hrlsched.contract import Decision
from hrlsched.core import CATALOGUE
from hrlsched.perf import OptimusModel
from hrlsched.policies import make_scheduler
from hrlsched.policies.base import Allocation
from hrlsched.policies.placement.migrate import MigratePlacement, migrate
from hrlsched.sim import EngineConfig, Simulator
from tests.helpers import job, make_view


def _setup():  # noqa: ANN202
    topo = Topology.from_spec(uniform_cluster(3, 4))  # 3 servers of 4 GPUs
    return topo, OptimusModel(topo, CATALOGUE)


def test_a_scattered_job_moves_onto_one_server_where_one_is_free() -> None:
    topo, perf = _setup()
    a = job(0, gpus=2, arch="allreduce")
    split = Placement.of([3, 4])  # GPU 3 on server 0, GPU 4 on server 1
    view = make_view(topo, perf, [a], [split])
    d = migrate(view, Decision(placements={0: split}))
    new = d.placements[0]
    assert new.n_workers == 2 and len(set(topo.gpu_server[list(new.gpus)])) == 1


def test_nothing_moves_without_room_and_a_compact_decision_is_returned_as_is() -> None:
    topo, perf = _setup()
    jobs = [job(0, gpus=2, arch="allreduce"), job(1, gpus=3, arch="allreduce"), job(2, gpus=3, arch="allreduce"),
            job(3, gpus=4, arch="allreduce")]
    # job 0 spans servers 0 and 1; jobs 1-3 fill every other GPU: no server has two free GPUs
    pls = [Placement.of([3, 7]), Placement.of([0, 1, 2]), Placement.of([4, 5, 6]), Placement.of([8, 9, 10, 11])]
    view = make_view(topo, perf, jobs, pls)
    d = Decision(placements=dict(enumerate(pls)))
    assert migrate(view, d).placements == d.placements
    compact = Decision(placements={1: pls[1], 3: pls[3]})
    assert migrate(view, compact) is compact


def test_a_job_larger_than_a_server_spans_the_fewest_servers_and_stays() -> None:
    topo, perf = _setup()
    big = job(0, gpus=6, arch="allreduce")
    pl = Placement.of([0, 1, 2, 3, 4, 5])  # two servers: the fewest for 6 workers
    view = make_view(topo, perf, [big], [pl])
    assert migrate(view, Decision(placements={0: pl})).placements[0] == pl


def test_migrate_placement_places_like_pack_then_consolidates() -> None:
    topo, perf = _setup()
    a = job(0, gpus=2, arch="allreduce")
    view = make_view(topo, perf, [a], [Placement.of([3, 4])])
    out = MigratePlacement().place(view, {0: Allocation(workers=2)})
    assert len(set(topo.gpu_server[list(out[0].gpus)])) == 1
    assert make_scheduler("optimus+migrate").name == "optimus+migrate"


def test_optimus_tuned_with_a_placement_is_named_for_it_and_a_bad_one_is_refused() -> None:
    assert make_scheduler("optimus-tuned+migrate").name == "optimus-tuned+migrate"
    assert make_scheduler("optimus-tuned").name == "optimus-tuned"
    with pytest.raises(ValueError, match="unknown placement 'nope'"):
        make_scheduler("optimus-tuned+nope")


def test_a_run_with_migration_finishes_every_job_and_moves_a_stranded_one() -> None:
    """Two servers; a 2-worker job arrives while each server has one GPU
    free, so pack splits it; when a neighbour finishes, migrate moves it
    onto one server, once (a restart), and pack leaves it split."""
    topo = Topology.from_spec(uniform_cluster(2, 4))
    perf = OptimusModel(topo, CATALOGUE)
    jobs = [job(0, samples=2e3, gpus=3, arch="allreduce"), job(1, samples=1e6, gpus=3, arch="allreduce"),
            job(2, arrival=60.0, samples=2e5, gpus=2, arch="allreduce")]
    out = {}
    for place in ("pack", "migrate"):
        sched = make_scheduler(f"fifo+{place}")
        res = Simulator(topo, jobs, perf, sched, EngineConfig(round_s=60.0, restart_s=10.0)).run()
        assert np.isfinite(res.finish_s).all()
        out[place] = res
    # moved once, when job 0 left room on its server (not back and forth)
    assert out["migrate"].restarts[2] == out["pack"].restarts[2] + 1
