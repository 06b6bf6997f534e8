"""DL2 and Harmony, the RL schedulers of the literature rebuilt on this
engine (``rivals/dl2.py``, ``rivals/harmony.py``): action space, masks,
learning on a tiny scenario (better than random), Harmony's reward
prediction on held-out samples, running inside the engine, checkpoints and
training seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hrlsched.agent.common import checkpoint as common  # noqa: E402
from hrlsched.agent.common.shipped import shipped_checkpoint  # noqa: E402
from hrlsched.agent.common.training_run import read_config  # noqa: E402
from hrlsched.envs.pool import WorkloadPool  # noqa: E402
from hrlsched.errors import CheckpointError  # noqa: E402
from hrlsched.rivals import actor_critic, dl2, harmony  # noqa: E402

TINY = ["workload.jobs=10", "workload.duration_h=0.5"]
INTERFERENCE = ["cluster.server_groups.0.nic_gbps=10", "cluster.server_groups.0.switches_per_socket=1",
                "cluster.server_groups.0.gpus_per_switch=4"]
# Harmony: 2 servers of 8 GPUs, so that jobs must share servers
TINY_H = [*INTERFERENCE, "cluster.server_groups.0.count=2", "workload.jobs=12", "workload.duration_h=0.5"]


class Log:
    def print(self, *a: object, **k: object) -> None:
        pass


def first_view(overrides: list[str], seed: int = 1000):  # noqa: ANN201
    pool = WorkloadPool("default", [seed], overrides)
    sim = pool.simulation(seed, 1, "events")
    return sim.reset(0)


# ---------------------------------------------------------------- DL2
@pytest.mark.parametrize("window", [5, 40])
def test_dl2_has_3j_plus_1_actions(window: int) -> None:
    cfg = dl2.DL2Config(window=window)
    assert cfg.n_actions == 3 * window + 1
    view = first_view(TINY)
    pt = dl2.Point(view, cfg, {}, {})
    assert pt.mask().shape == (3 * window + 1,)
    assert pt.state().shape == (cfg.n_inputs,)
    for kind in ("shared", "fc"):
        net = dl2.DL2Net(dl2.DL2Config(window=window, net=kind))
        x = torch.from_numpy(np.stack([pt.state(), pt.state()]).astype(np.float32))
        assert net.logits(x).shape == (2, 3 * window + 1)
        assert net.value_of(x).shape == (2,)
        # the policy in numpy (inside the engine) is the torch one
        np.testing.assert_allclose(dl2.NumpyPolicy(net)(pt.state()), net.logits(x)[0].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)


def test_dl2_actions_and_masks() -> None:
    cfg = dl2.DL2Config(window=8)
    view = first_view(TINY)
    pt = dl2.Point(view, cfg, {}, {})
    m = pt.mask()
    J = cfg.window
    assert not m[3 * J], "stop while nothing runs and a job fits"
    assert not m[3 * pt.n:3 * J].any(), "empty window slots"
    k = next(k for k in range(pt.n) if pt.is_ps[k])
    assert not m[3 * k + dl2.WORKER] and not m[3 * k + dl2.PS] and m[3 * k + dl2.BUNDLE], \
        "a PS job starts with a worker and a PS"
    pt.act(3 * k + dl2.BUNDLE)
    assert (pt.w[k], pt.p[k]) == (1, 1)
    assert pt.mask()[3 * k + dl2.WORKER] and not pt.mask()[3 * k + dl2.PS], "PSs never outnumber workers"
    assert pt.mask()[3 * J], "stop once a job runs"
    pt.act(3 * k + dl2.WORKER)
    assert (pt.w[k], pt.p[k]) == (2, 1)
    with pytest.raises(ValueError, match="masked"):
        pt.act(3 * (J - 1))
    assert pt.allocations()[view.jobs[k].job_id].workers == 2
    # DRF's increments in DL2's action space run every job at its request on a quiet cluster
    pt = dl2.Point(view, cfg, {}, {})
    while not pt.done:
        pt.act(pt.drf_action())
    for k in range(pt.n):
        assert pt.w[k] == min(view.jobs[k].requested_gpus, pt.max_w)


def test_dl2_runs_its_shared_network_on_another_window() -> None:
    """``set_window``: the shared network scores any number of job slots, the
    same way (a job's logits do not depend on the slots after it beyond the
    window's mean and max rows); the paper's flat network, one input per
    slot, is refused, as is a window that is not a positive integer."""
    view = first_view(TINY)
    sched = dl2.DL2Scheduler()
    assert sched.cfg.window == 40
    wide = dl2.DL2Scheduler()
    wide.set_window(80)
    assert wide.cfg.window == 80 and sched.cfg.window == 40  # (its own config, not the checkpoint's)
    a = dl2.Point(view, sched.cfg, {}, {})
    b = dl2.Point(view, wide.cfg, {}, {})
    assert b.mask().shape == (3 * 80 + 1,)
    la, lb = sched.policy(a.state()), wide.policy(b.state())
    n = a.n
    assert n < 40
    # the same jobs, the same features but the window's share of jobs (n / J) and of the backlog
    np.testing.assert_array_equal(a.X[:n], b.X[:n])
    assert lb.shape == (3 * 80 + 1,) and np.isfinite(lb).all() and not np.allclose(la[:3 * n], lb[:3 * n])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="window: expected a positive integer"):
            sched.set_window(bad)  # type: ignore[arg-type]
    cfg = dl2.DL2Config(window=5, net="fc")
    flat = dl2.DL2Scheduler(net=dl2.DL2Net(cfg), cfg=cfg)
    with pytest.raises(ValueError, match="net: fc"):
        flat.set_window(8)


def test_dl2_point_tells_the_jobs_its_network_held_back() -> None:
    """``Point.held_back``: on *stop*, the window's jobs below their request
    that could still take a worker; none once nothing more fits."""
    cfg = dl2.DL2Config(window=8)
    view = first_view(TINY)
    pt = dl2.Point(view, cfg, {}, {})
    k = next(k for k in range(pt.n) if pt.is_ps[k] and pt.req[k] > 1)
    for j in range(pt.n):  # every job starts, then job k stops at one worker
        pt.act(3 * j + (dl2.BUNDLE if pt.is_ps[j] else dl2.WORKER))
    pt.act(3 * cfg.window)
    assert pt.done and pt.held_back()[k] and not pt.held_back()[pt.w[:pt.n] >= pt.req[:pt.n]].any()
    pt = dl2.Point(view, cfg, {}, {})
    while not pt.done:
        pt.act(pt.drf_action())
    assert not pt.held_back().any()


def tiny_dl2(out: Path, **kw: object) -> dl2.Trainer:
    cfg = dl2.DL2Config(overrides=TINY, train_seeds=[1000, 1001, 1002], valid_seeds=[100], window=10,
                        sl_episodes=3, sl_epochs=40, sl_minibatch=32, minutes=None, steps=1, eval_every_min=100.0,
                        horizon_h=None, **kw)  # type: ignore[arg-type]
    return dl2.Trainer(cfg, out, log=lambda s: None)


@pytest.fixture(scope="module")
def dl2_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dl2")
    tiny_dl2(out).run()
    return out


def test_dl2_learns_on_a_tiny_scenario_and_beats_random(dl2_run: Path) -> None:
    cfg, net = dl2.CHECKPOINTS.build(dl2.CHECKPOINTS.load(dl2_run / "best.pt"))
    pool = WorkloadPool("default", [100, 101], TINY)
    learned = np.mean([dl2.run_episode(pool, s, dl2.DL2Scheduler(net=net, cfg=cfg), cfg, False, None).avg_jct_s
                       for s in (100, 101)])
    rand = dl2.DL2Scheduler(net=net, cfg=cfg, act="random")
    random_ = np.mean([dl2.run_episode(pool, s, rand, cfg, False, None).avg_jct_s for s in (100, 101)])
    assert learned < 0.8 * random_, (learned, random_)
    assert (dl2_run / "sl.pt").is_file() and (dl2_run / "metrics.csv").is_file()


def test_dl2_resumes_from_its_last_checkpoint(dl2_run: Path) -> None:
    before = dl2.CHECKPOINTS.load(dl2_run / "last.pt")
    t = dl2.Trainer(dl2.DL2Config(**before["config"]), dl2_run, log=lambda s: None, resume=True)
    assert (t.episodes, t.steps) == (before["episodes"], before["steps"]) and t.sl_done
    t.cfg.steps = t.steps + 1
    t.run()
    assert dl2.CHECKPOINTS.load(dl2_run / "last.pt")["episodes"] == before["episodes"] + 1


def test_dl2_runs_inside_the_engine(dl2_run: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hrlsched.cli import app

    small = tmp_path / "dl2-small.pt"
    dl2.CHECKPOINTS.export(dl2_run / "best.pt", small)
    res = CliRunner().invoke(app, ["simulate", "--scenario", "default", "--policy", "dl2", "--checkpoint",
                                   str(small), "--out", str(tmp_path / "run"), "--no-plots",
                                   *sum((["--set", o] for o in TINY), [])])
    assert res.exit_code == 0, res.output
    import json

    summ = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summ["jobs_completed"] == summ["jobs_total"] == 10


# -------------------------------------------------------------- Harmony
def test_harmony_prediction_network_lowers_held_out_error() -> None:
    from hrlsched.policies.registry import make_scheduler

    pool = WorkloadPool("default", [1000, 1001, 1002, 1003, 100, 101], TINY_H)
    cfg = harmony.HarmonyConfig(overrides=TINY_H)

    def samples(seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
        xs, ys = [], []
        for place in ("pack", "random", "balance"):
            for s in seeds:
                ep = harmony.run_episode(pool, s, make_scheduler(f"fifo+{place}"), None, collect=True)
                xs += ep.sample_x
                ys += ep.sample_y
        return np.asarray(xs), np.asarray(ys)

    X, y = samples([1000, 1001, 1002, 1003])
    HX, Hy = samples([100, 101])  # held out: other workloads
    assert len(y) > 300 and len(Hy) > 100 and X.shape[1] == len(harmony.PRED_FEATURES)
    torch.manual_seed(0)
    net = harmony.HarmonyNet(cfg)
    before = harmony.predictor_mse(net, HX, Hy)
    harmony.fit_predictor(net, X, y, 40, 3e-3, np.random.default_rng(0))
    after = harmony.predictor_mse(net, HX, Hy)
    # well below the untrained error and below predicting the held-out mean
    assert after < before / 4 and after < 0.6 * float(Hy.var()), (before, after, float(Hy.var()))


@pytest.fixture(scope="module")
def harmony_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harmony")
    cfg = harmony.HarmonyConfig(overrides=TINY_H, train_seeds=[1000, 1001, 1002], valid_seeds=[100], minutes=None,
                                steps=300, history_episodes=2, pred_epochs=20, eval_every_min=100.0,
                                horizon_h=None)
    harmony.Trainer(cfg, out, log=lambda s: None).run()
    return out


def test_harmony_learns_on_a_tiny_scenario_and_beats_random(harmony_run: Path) -> None:
    cfg, net = harmony.CHECKPOINTS.build(harmony.CHECKPOINTS.load(harmony_run / "best.pt"))
    seeds = (100, 101, 102, 103)
    pool = WorkloadPool("default", list(seeds), TINY_H)
    learned = np.mean([harmony.run_episode(pool, s, harmony.HarmonyScheduler(net=net, cfg=cfg), None).avg_jct_s
                       for s in seeds])
    rand = harmony.HarmonyScheduler(net=net, cfg=cfg, act="random")
    random_ = np.mean([harmony.run_episode(pool, s, rand, None).avg_jct_s for s in seeds])
    assert learned < random_, (learned, random_)


def test_harmony_resumes_from_its_last_checkpoint(harmony_run: Path) -> None:
    before = harmony.CHECKPOINTS.load(harmony_run / "last.pt")
    t = harmony.Trainer(harmony.HarmonyConfig(**before["config"]), harmony_run, log=lambda s: None, resume=True)
    assert (t.episodes, t.steps) == (before["episodes"], before["steps"]) and t.history_done and t.sl_done
    assert t.samples.size == len(before["samples"]["y"]) > 0  # the observed samples come back too
    t.cfg.steps = t.steps + 1
    t.run()
    assert harmony.CHECKPOINTS.load(harmony_run / "last.pt")["episodes"] == before["episodes"] + 1


def test_harmony_runs_inside_the_engine(harmony_run: Path, tmp_path: Path) -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    small = tmp_path / "harmony-small.pt"
    harmony.CHECKPOINTS.export(harmony_run / "best.pt", small)
    cfg = resolve_run_config("default", "harmony", 0, [*TINY_H, f"checkpoint={small}"])
    s = summary(simulate(cfg), "harmony", "default")
    assert s["jobs_completed"] == s["jobs_total"] == 12


# ------------------------------------------------------- both: seeds, checkpoints
@pytest.mark.parametrize("module", [dl2, harmony])
def test_training_refuses_evaluation_seeds(module: object, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="seeds 0-99"):
        actor_critic.train_command(module.Trainer, scenario="default", out=tmp_path / "x",  # type: ignore[attr-defined]
                                   minutes=0.1, steps=None, workers=1, seeds=[5, 1000], overrides=TINY, resume=False,
                                   seed=0, init=None, backend="local", log=Log())
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_checkpoints_of_another_kind_or_schema_are_refused(dl2_run: Path, tmp_path: Path) -> None:
    from hrlsched.policies.registry import make_scheduler

    with pytest.raises(CheckpointError, match="not of harmony"):
        harmony.CHECKPOINTS.load(dl2_run / "best.pt")
    with pytest.raises(ValueError, match="a checkpoint of dl2, not of the hrl agent"):
        make_scheduler("hrl", checkpoint=str(dl2_run / "best.pt"))
    ck = dl2.CHECKPOINTS.load(dl2_run / "best.pt")
    ck["features"] = {"job": ck["features"]["job"][:-1], "global": ck["features"]["global"]}
    common.save(tmp_path / "old.pt", {k: v for k, v in ck.items() if k != "format"})
    with pytest.raises(CheckpointError, match="only here: \\['gain_bundle'\\]"):
        dl2.CHECKPOINTS.load(tmp_path / "old.pt")
    with pytest.raises(ValueError, match="no such checkpoint"):
        make_scheduler("dl2", checkpoint=str(tmp_path / "missing.pt"))
    # written whole: no temporary file left beside the checkpoints
    assert not [p for p in dl2_run.iterdir() if p.name.startswith(".")]


def test_invalid_settings_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gamma: expected a value in \\[0, 1\\]"):
        dl2.DL2Config(gamma=1.5).validate()
    with pytest.raises(ValueError, match="window: expected a positive integer"):
        dl2.DL2Config(window=0).validate()
    with pytest.raises(ValueError, match="net: expected 'shared' or 'fc'"):
        dl2.DL2Config(net="cnn").validate()
    with pytest.raises(ValueError, match="allocation: unknown policy 'nope'"):
        harmony.HarmonyConfig(allocation="nope").validate()
    with pytest.raises(ValueError, match="lr: expected a positive value, got 0.0"):
        harmony.HarmonyConfig(lr=0.0).validate()
    # a hand-edited config.yaml of a run: wrong types and unknown names are named
    (tmp_path / "config.yaml").write_text("lr: fast\n")
    with pytest.raises(ValueError, match="lr: expected a value like [0-9.e-]+, got 'fast'"):
        read_config(tmp_path, dl2.DL2Config)
    (tmp_path / "config.yaml").write_text("speed: 3\n")
    with pytest.raises(ValueError, match="unknown settings \\['speed'\\]"):
        read_config(tmp_path, harmony.HarmonyConfig)


@pytest.mark.parametrize("name", ["dl2", "harmony"])
def test_shipped_checkpoints_load_and_run(name: str) -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.policies.registry import make_scheduler
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    module = {"dl2": dl2, "harmony": harmony}[name]
    path = shipped_checkpoint(module.CHECKPOINTS.shipped)  # type: ignore[attr-defined]
    assert path.is_file() and path.stat().st_size < 300_000, path
    assert make_scheduler(name).name == name
    s = summary(simulate(resolve_run_config("default", name, 0, TINY)), name, "default")
    assert s["jobs_completed"] == s["jobs_total"] == 10


def test_train_cli_refuses_hrl_only_options(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hrlsched.cli import app

    res = CliRunner().invoke(app, ["train", "--agent", "dl2", "--out", str(tmp_path / "x"), "--level", "2"])
    assert res.exit_code == 2 and "--level: only --agent hrl takes it" in res.output, res.output
    res = CliRunner().invoke(app, ["train", "--agent", "dl2", "--out", str(tmp_path / "x"), "--option", "nosuch=1"])
    assert res.exit_code == 2 and "nosuch=1" in res.output and "entropy" in res.output, res.output
    res = CliRunner().invoke(app, ["train", "--agent", "harmony", "--out", str(tmp_path / "x"),
                                   "--option", "entropy=-1"])
    assert res.exit_code == 2 and "entropy" in res.output, res.output
    assert not (tmp_path / "x").exists()


def test_options_typed_by_field() -> None:
    from hrlsched.commands.train import apply_options

    cfg = dl2.DL2Config()
    apply_options(cfg, ["entropy=0.1", "lr=1e-4", "window=20", "reward=jct", "horizon_h=none", "steps=500"])
    assert (cfg.entropy, cfg.lr, cfg.window, cfg.reward, cfg.horizon_h, cfg.steps) == (0.1, 1e-4, 20, "jct", None, 500)
    assert isinstance(cfg.lr, float) and isinstance(cfg.steps, int)
    apply_options(cfg, ["horizon_h=6"])
    assert cfg.horizon_h == 6.0 and isinstance(cfg.horizon_h, float)
    with pytest.raises(ValueError, match="window=many"):
        apply_options(cfg, ["window=many"])


PS_SMALL = ["workload.gpu_counts=[1,2,4]", "workload.gpu_probs=[0.6,0.25,0.15]", "workload.jobs=90",
            "workload.allreduce_fraction=0", "workload.open_fraction=0"]


def test_ps_small_scenario_is_default_with_small_ps_jobs() -> None:
    """``ps-small`` (the scenario where Harmony's placement is measured
    against ``pack``): ``default``'s cluster and models, small PS jobs, 90
    of them; the same jobs as ``default`` with those overrides."""
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario

    cfg = resolve_run_config("ps-small").scenario
    ref = resolve_run_config("default", overrides=PS_SMALL).scenario
    assert cfg.name == "ps-small"
    assert cfg.cluster == ref.cluster and cfg.workload == ref.workload
    w = cfg.workload
    assert (w.jobs, w.gpu_counts, w.allreduce_fraction, w.models) == (90, [1, 2, 4], 0.0, None)
    jobs = build_scenario(cfg, 100).jobs
    assert len(jobs) == 90 and all(j.arch == "ps" and j.requested_gpus <= 4 for j in jobs)
    assert [(j.model, j.requested_gpus, j.arrival_s) for j in jobs] == \
        [(j.model, j.requested_gpus, j.arrival_s) for j in build_scenario(ref, 100).jobs]


def test_evaluate_sets_harmony_against_its_placements(harmony_run: Path, tmp_path: Path) -> None:
    """``hrlsched evaluate --rivals --harmony PATH``: Harmony's row and its
    paper's baselines, its checkpoint's allocation placed by pack, topology
    and random, paired by seed (what benchmarks/rl_rivals.py printed)."""
    from typer.testing import CliRunner

    from hrlsched.cli import app

    small = tmp_path / "harmony-small.pt"
    harmony.CHECKPOINTS.export(harmony_run / "best.pt", small)
    r = CliRunner().invoke(app, ["evaluate", "--scenario", "ps-small", "--seeds", "100", "--no-ablate", "--rivals",
                                 "--harmony", str(small), "--policies", "fifo", "--workers", "1", "--out",
                                 str(tmp_path / "ev"), "--set", "workload.jobs=8", "--set", "workload.duration_h=0.5"])
    assert r.exit_code == 0, r.output
    assert "harmony vs fifo+pack" in r.output and "harmony vs fifo+random" in r.output and "dl2 vs drf" in r.output
    assert (tmp_path / "ev" / "runs" / "fifo_topology" / "seed100" / "summary.json").is_file()
