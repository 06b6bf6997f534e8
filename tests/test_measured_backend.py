import re
from pathlib import Path

import numpy as np
import pytest

from hrlsched.cluster import ClusterSpec, Placement, ServerGroupSpec, Topology
from hrlsched.core import CATALOGUE, Job
from hrlsched.perf.goodput import canonical_rotation, load_pollux_application, read_placements
from hrlsched.perf.measured import MeasuredModel


def make_app(root: Path) -> Path:
    d = root / "toy"
    d.mkdir(parents=True)
    rows = ["placement,local_bsz,step_time,sync_time"]
    for pid, extra in (("1", 0.0), ("2", 0.02), ("11", 0.1), ("22", 0.12)):
        for lb in (8, 16, 32):
            rows.append(f"{pid},{lb},{0.01 * lb + 0.05 + extra},{extra + 0.001}")
    (d / "placements.csv").write_text("\n".join(rows) + "\n")
    (d / "scalability.csv").write_text("num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
                                       "4,4,8,0.3,0.2\n4,4,32,0.6,0.2\n8,8,8,0.35,0.25\n8,8,32,0.65,0.25\n")
    for bs, sqr in ((8, 1.0), (64, 1.0)):
        (d / f"validation-{bs}.csv").write_text(
            "progress,iteration,metric,grad_sqr,grad_var\n" + "".join(f"{100.0 * (e + 1)},{e},0.5,{sqr},3.0\n" for e in range(5)))
    return root


@pytest.fixture
def model(tmp_path: Path) -> MeasuredModel:
    make_app(tmp_path)
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=4, sockets=1, switches_per_socket=2, gpus_per_switch=2, gpu_type="T4")]))
    cat = {**CATALOGUE, "toy": CATALOGUE["cifar10"]}
    return MeasuredModel(topo, cat, traces_dir=str(tmp_path))


def test_measured_points_are_returned_exactly(model: MeasuredModel) -> None:
    app = model.apps["toy"]
    for pid, gpus in (("1", (0,)), ("2", (0, 1)), ("11", (0, 4)), ("22", (0, 1, 4, 5))):
        w = len(gpus)
        for lb in (8, 16, 32):
            j = Job(0, 0.0, "toy", 1e4, lb * w, w, arch="allreduce")
            step, sync = app.get_throughput(tuple(int(c) for c in pid), float(lb))
            extra = {"1": 0.0, "2": 0.02, "11": 0.1, "22": 0.12}[pid]
            assert step == pytest.approx(0.01 * lb + 0.05 + extra)
            # One GPU above the initial batch accumulates gradients, and batches are capped
            # at the largest validated one (Pollux rules), so compare only where neither applies.
            if (w > 1 or lb == 8) and lb * w <= app.max_batch_size:
                assert model.speeds([j], [Placement(gpus)])[0] == pytest.approx(lb * w / step)


def test_interpolation_between_batches_and_placements(model: MeasuredModel) -> None:
    app = model.apps["toy"]
    mid, _ = app.get_throughput((1,), 12.0)
    assert 0.01 * 8 + 0.05 < mid < 0.01 * 16 + 0.05
    # An unmeasured placement (4 nodes x 1) comes from the (nodes, replicas, batch) interpolation.
    s4, _ = app.get_throughput((1, 1, 1, 1), 8.0)
    assert s4 == pytest.approx(0.3)
    assert canonical_rotation((2, 1, 3)) == (1, 3, 2)


def test_efficiency_follows_gradient_noise_scale(model: MeasuredModel) -> None:
    app = model.apps["toy"]
    assert app.init_batch_size == 8 and app.total_progress == pytest.approx(500.0)
    assert app.samples_to_complete() == pytest.approx(4000.0)
    # gain = (var + sqr) / (var / scale + sqr), scale = 64 / 8
    assert app.gain(64, 0.0) == pytest.approx(4.0 / (3.0 / 8 + 1.0))
    j = Job(0, 0.0, "toy", 1e4, 64, 2, arch="allreduce")
    eff = model.efficiency([j], [Placement((0, 1))], np.array([64]), np.array([0.0]))[0]
    assert eff == pytest.approx(app.gain(64, 0.0) * 8 / 64)


def test_efficiency_until_is_the_next_epoch_boundary_never_past_it(model: MeasuredModel) -> None:
    app = model.apps["toy"]  # epochs end at progress 100, 200, ... 500 steps of the initial batch (8)
    j = Job(0, 0.0, "toy", 1e4, 64, 2, arch="allreduce")
    p = np.array([0.0, 850.0, 1600.0, 4000.0, 5000.0])
    until = model.efficiency_until([j] * 5, [Placement((0, 1))] * 5, np.full(5, 64), p)
    np.testing.assert_allclose(until[:3], [800.0, 1600.0, 2400.0], rtol=1e-8)
    assert np.all(until[:3] < [800.0, 1600.0, 2400.0])  # a hair early, never late
    assert np.all(np.isinf(until[3:]))  # past the last epoch: it never moves again
    for a, u in zip(p[:3], until[:3]):
        assert app.epoch_of(a / 8) == app.epoch_of(u / 8) < app.epoch_of(u / 8 * (1 + 1e-8))


def test_bad_rows_are_named(tmp_path: Path) -> None:
    f = tmp_path / "placements.csv"
    f.write_text("placement,local_bsz,step_time,sync_time\n1,8,0.1,0.01\n10,8,0.1,x\n")
    with pytest.raises(ValueError, match=re.escape("placements.csv:3: field sync_time: expected float")):
        read_placements(f)
    f.write_text("placement,local_bsz,step_time,sync_time\n1,8,0.1,0.01\n10,8,0.1,0.2\n")
    with pytest.raises(ValueError, match=re.escape("placements.csv:3: field placement")):
        read_placements(f)
    with pytest.raises(FileNotFoundError, match="validation"):
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "placements.csv").write_text("placement,local_bsz,step_time,sync_time\n")
        load_pollux_application(tmp_path / "empty")


def test_unknown_model_is_named(model: MeasuredModel) -> None:
    with pytest.raises(ValueError, match="has no measured trace"):
        model.speeds([Job(3, 0.0, "vgg-16", 1.0, 32, 1)], [Placement((0,), (0,))])


def test_leave_one_placement_out_figure(tmp_path: Path) -> None:
    from hrlsched.perf.measured import measured_figures

    make_app(tmp_path / "pollux" / "traces")
    figs = measured_figures(tmp_path)
    assert set(figs) == {"measured_loo_step_mape_pct.toy"}
    assert 0 <= figs["measured_loo_step_mape_pct.toy"] < 100


def test_rounds_skipped_between_epochs_give_the_round_by_round_result(tmp_path: Path) -> None:
    import dataclasses

    from hrlsched.policies import make_scheduler
    from hrlsched.sim import EngineConfig, Simulator

    make_app(tmp_path)
    # Efficiency that does move per epoch: the gradient noise grows over the epochs.
    for bs in (8, 64):
        (tmp_path / "toy" / f"validation-{bs}.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n" + "".join(
            f"{100.0 * (e + 1)},{e},0.5,{1.0 / (e + 1)},{3.0 * (e + 1)}\n" for e in range(5)))
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=4, sockets=1, switches_per_socket=2, gpus_per_switch=2, gpu_type="T4")]))
    m = MeasuredModel(topo, {**CATALOGUE, "toy": CATALOGUE["cifar10"]}, traces_dir=str(tmp_path))
    rng = np.random.default_rng(1)
    gpus = rng.choice([1, 2], size=10)  # measured placements only: 1 or 2 GPUs of a server
    jobs = [Job(i, float(rng.uniform(0, 600)), "toy", 3900.0, int(16 * g), int(g), arch="allreduce")
            for i, g in enumerate(gpus)]
    eng = EngineConfig(round_s=10.0)
    fast = Simulator(topo, jobs, m, make_scheduler("fifo"), eng).run()
    slow = Simulator(topo, jobs, m, make_scheduler("fifo"), dataclasses.replace(eng, decision_points="round")).run()
    for f in ("start_s", "finish_s", "gpu_seconds", "progress"):
        np.testing.assert_allclose(getattr(fast, f), getattr(slow, f), rtol=1e-9, err_msg=f)
    assert len({round(float(x), 6) for x in m.efficiency(jobs[:1] * 5, [Placement((0,))] * 5, np.full(5, 16),
                                                       np.array([0.0, 900.0, 1700.0, 2500.0, 3300.0]))}) == 5
