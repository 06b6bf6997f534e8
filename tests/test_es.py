"""``hrlsched train-es``: evolution strategies on the agent's residual layer (agent/es.py)."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from hrlsched.agent.common.shipped import shipped_checkpoint
from hrlsched.agent.es import PARTS, ESConfig, _episode, train  # noqa: E402

SETS = ("workload.jobs=6", "workload.duration_h=0.3")


def cfg(**kw: object) -> ESConfig:
    base = dict(scenario="default", overrides=SETS, iterations=2, pairs=1, seeds_per_pair=1, eval_every=1,
                held_back=(100,), workers=1)
    return ESConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_a_zero_residual_is_the_rules() -> None:
    from hrlsched.agent.rules import RulesScheduler
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    b = build_scenario(resolve_run_config("default", "hrl", 101, list(SETS)).scenario, 101)
    res = Simulator(b.topology, b.jobs, b.perf, RulesScheduler(), b.engine, seed=101, predictor=b.predictor).run()
    rules = float(np.mean(res.finish_s - np.array([j.arrival_s for j in res.jobs])))
    case = "default@" + ",".join(SETS)
    jct, steps = _episode(None, case, 101, None)
    assert jct == rules and steps > 0
    # zero weights on every learned part the shipped agent has are the rules too (a part not learned is the
    # starting checkpoint's: its selector stays where only the residual is learned)
    n = PARTS["selector"]
    assert _episode(None, case, 101, np.zeros(PARTS["residual"] + n), ("residual", "selector")) == (jct, steps)
    assert _episode(None, case, 101, np.zeros(n), ("selector",)) == (jct, steps)
    from hrlsched.agent.residual import RESIDUAL_FEATURES

    w = np.zeros(PARTS["residual"])
    w[RESIDUAL_FEATURES.index("half_x_arrived")] = 50.0  # halves only where jobs arrived lately
    assert _episode(None, case, 101, w)[0] != jct  # the policy gives the residual each point's arrived


@pytest.mark.parametrize("method", ["es", "cem"])
def test_resume_continues_as_one_run_and_settings_must_match(tmp_path: Path, method: str) -> None:
    whole = train(cfg(method=method), tmp_path / "a")
    train(cfg(iterations=1, method=method), tmp_path / "b")
    resumed = train(cfg(method=method), tmp_path / "b", resume=True)
    np.testing.assert_array_equal(resumed.theta, whole.theta)
    assert [r["train_gain_pct"] for r in resumed.curve] == [r["train_gain_pct"] for r in whole.curve]
    assert (tmp_path / "b" / "curve.csv").read_text().count("\n") == 3 and (tmp_path / "b" / "curve.png").is_file()
    with pytest.raises(ValueError, match="other settings"):
        train(cfg(sigma=0.2, method=method), tmp_path / "b", resume=True)
    with pytest.raises(ValueError, match="already"):
        train(cfg(method=method), tmp_path / "b")
    from hrlsched.agent.common import checkpoint as common

    st = common.read(tmp_path / "b" / "state.pt")  # a run of a version whose residual had 2 features fewer
    st["theta"] = np.asarray(st["theta"])[:-2]
    common.save(tmp_path / "b" / "state.pt", st)
    with pytest.raises(ValueError, match="this version's have"):
        train(cfg(method=method), tmp_path / "b", resume=True)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="held_back"):
        cfg(held_back=(5,))
    with pytest.raises(ValueError, match="pairs"):
        cfg(pairs=0)
    with pytest.raises(ValueError, match="method"):
        cfg(method="sgd")
    with pytest.raises(ValueError, match="learn"):
        cfg(learn=("network",))
    with pytest.raises(ValueError, match="cases"):
        cfg(cases=("comm",))  # with overrides: each case carries its own
    with pytest.raises(ValueError, match="expected SCENARIO"):
        cfg(overrides=(), cases=("comm@noequals",))
    with pytest.raises(ValueError, match="drop"):
        cfg(learn=("residual",), drop=("arrived",))  # no selector learned
    with pytest.raises(ValueError, match="drop"):
        cfg(learn=("selector",), drop=("nosuch",))
    with pytest.raises(ValueError, match="drop"):
        cfg(learn=("selector",), drop=("half",))  # a residual feature, no residual learned
    from hrlsched.agent.residual import RESIDUAL_FEATURES
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES

    # a residual feature dropped where both parts learn: its one weight, the selector's untouched
    m = cfg(learn=("selector", "residual"), drop=("half_x_arrived", "idle")).mask()
    n = PARTS["selector"]
    assert m[n:].tolist() == [0.0 if f == "half_x_arrived" else 1.0 for f in RESIDUAL_FEATURES]
    assert m[:n].reshape(len(SELECTOR_POLICIES), -1)[:, SELECTOR_FEATURES.index("idle")].tolist() == [0.0] * 4
    assert m[:n].sum() == n - len(SELECTOR_POLICIES)


def test_a_dropped_feature_is_held_at_zero_with_the_same_draws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``drop``: the feature's weights stay 0 through the run, and the other
    weights move exactly as in the same run where the feature is read as 0
    (the workers fork after the patch): the same draws, the feature alone
    removed."""
    from hrlsched.agent import selector
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES

    c = dict(method="cem", learn=("selector",), sigma=1.0, pairs=2, iterations=2)
    dropped = train(cfg(**c, drop=("idle",)), tmp_path / "a")
    i = SELECTOR_FEATURES.index("idle")
    w = dropped.theta.reshape(len(SELECTOR_POLICIES), len(SELECTOR_FEATURES))
    assert not w[:, i].any() and w.any()
    assert "drop" in (tmp_path / "a" / "config.yaml").read_text()
    read = selector.point_features

    def zeroed(view, own):  # type: ignore[no-untyped-def]
        f = read(view, own)
        f[i] = 0.0
        return f

    monkeypatch.setattr(selector, "point_features", zeroed)
    blind = train(cfg(**c), tmp_path / "b")
    wb = blind.theta.reshape(w.shape).copy()
    wb[:, i] = 0.0
    np.testing.assert_array_equal(wb, w)
    assert [r["train_gain_pct"] for r in blind.curve] == [r["train_gain_pct"] for r in dropped.curve]


def test_placement_trains_over_the_rules_placed_so_and_saves_it(tmp_path: Path) -> None:
    """``--placement migrate``: the rules the samples are scored against are
    ``optimus-tuned+migrate``, to the bit, and the saved agent places so."""
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.config import resolve_run_config
    from hrlsched.policies.registry import make_scheduler
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    with pytest.raises(ValueError, match="nosuch"):
        cfg(placement="nosuch")
    b = build_scenario(resolve_run_config("default", "hrl", 101, list(SETS)).scenario, 101)
    res = Simulator(b.topology, b.jobs, b.perf, make_scheduler("optimus-tuned+migrate"), b.engine, seed=101,
                    predictor=b.predictor).run()
    rules = float(np.mean(res.finish_s - np.array([j.arrival_s for j in res.jobs])))
    assert _episode(None, "default@" + ",".join(SETS), 101, None, ("selector",), "migrate")[0] == rules
    from hrlsched.agent.common.shipped import shipped_checkpoint
    from hrlsched.agent.es import _save_agent
    from hrlsched.agent.policy import SHIPPED

    c = cfg(learn=("selector",), placement="migrate")
    _save_agent(ckpt.load(shipped_checkpoint(SHIPPED)), np.zeros(PARTS["selector"]), tmp_path / "a.pt", c, 1, 0.5)
    assert ckpt.load(tmp_path / "a.pt")["env_kwargs"]["placement"] == "migrate"
    assert HRLScheduler(tmp_path / "a.pt").env_kwargs["placement"] == "migrate"


def test_residual_features_are_relative_to_the_hint_and_zero_on_wait_and_keep() -> None:
    from hrlsched.agent.residual import RESIDUAL_FEATURES, residual_features
    from hrlsched.envs import features as F

    n = 5
    base = np.zeros((n, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
    dyn = np.zeros((n, len(F.DYN_FEATURES)), dtype=np.float32)
    ix = np.array([0, 1, 5, 9, 13])  # wait, keep, three real slots: 2, 4 and 1 workers
    base[:, F.CANDIDATE["workers"]] = np.array([0, 0, 2, 4, 1]) / F.WORKER_SCALE
    dyn[:, F.DYN_FEATURES.index("speed_vs_requested")] = [0, 0.9, 1.0, 1.6, 0.6]
    dyn[2, F.DYN_FEATURES.index("is_hint")] = 1
    cluster = np.zeros(len(F.CLUSTER_FEATURES), dtype=np.float32)
    cluster[F.CLUSTER["queued_jobs"]], cluster[F.CLUSTER["free_gpus_before"]] = 0.5, 0.25
    f = dict(zip(RESIDUAL_FEATURES, residual_features(cluster, base, dyn, ix, arrived=0.375).T))
    assert list(f["double"]) == [0, 0, 0, 1, 0] and list(f["half"]) == [0, 0, 0, 0, 1]
    assert f["double_x_free"][3] == 0.25 and f["half_x_queued"][4] == 0.5
    assert list(f["double_x_arrived"]) == [0, 0, 0, 0.375, 0] and list(f["half_x_arrived"]) == [0, 0, 0, 0, 0.375]
    assert abs(f["d_speed"][3] - 0.6) < 1e-6 and f["d_speed"][:3].tolist() == [0, 0, 0]
    dyn[:, F.DYN_FEATURES.index("is_hint")] = [0, 1, 0, 0, 0]  # the hint keeps: no residual
    assert not residual_features(cluster, base, dyn, ix).any()


def test_residual_rows_are_what_the_residual_reads_of_allocation_rows() -> None:
    """The agent with a residual over a silenced scorer decides on ``rule_rows`` and ``residual_rows``
    alone: at every choice of a run of the hetero agent its point's shares equal the cluster row's,
    each slot's partners (``twice``, ``half``) are those ``allocation_rows``' kinds and workers name,
    and ``residual_scores_at`` scores the choice as ``residual_scores`` does on ``allocation_rows``
    (every weight nonzero as well as the agent's)."""
    from hrlsched.agent import residual as R
    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.config import resolve_run_config
    from hrlsched.envs.candidates import KEEP
    from hrlsched.envs.decision import DecisionPoint
    from hrlsched.run import simulate

    pol = HRLScheduler(str(Path(R.__file__).parent / "checkpoints" / "hrl-hetero.pt"))
    assert pol.residual is not None and pol.residual[list(R.ARRIVED)].any()
    checked = [0, 0, 0]

    def check(dp):  # noqa: ANN001, ANN202
        free, queued, twice, half = light(dp)
        speed, hint, workers, ix = dp.rule_rows()
        _, cluster, _, base, dyn, _ = dp.allocation_rows()
        assert (free, queued) == (float(cluster[R._FREE]), float(cluster[R._QUEUED]))
        menu = ix > KEEP
        if hint >= 0 and ix[hint] > KEEP:
            same = (base[:, R._ARCH] == base[hint, R._ARCH]) & (base[:, R._MODE] == base[hint, R._MODE]) & menu
            w, hw = base[:, R._WORKERS], base[hint, R._WORKERS]
            np.testing.assert_array_equal(twice[ix[hint]][ix], same & (w == 2 * hw))
            np.testing.assert_array_equal(half[ix[hint]][ix], same & (w == hw / 2))
            checked[2] += bool(half[ix[hint]][ix].any())
        for wt in (pol.residual, np.arange(1.0, 1.0 + len(R.RESIDUAL_FEATURES))):  # every weight counts
            a = R.residual_scores_at(wt, free, queued, twice, half, speed, hint, ix, 0.25)
            np.testing.assert_array_equal(a, R.residual_scores(wt, cluster, base, dyn, ix, 0.25))
        checked[0] += 1
        checked[1] += bool(np.any(R.residual_scores_at(pol.residual, free, queued, twice, half, speed, hint,
                                                       ix, 0.25)))
        return free, queued, twice, half

    light = DecisionPoint.residual_rows
    cfg = resolve_run_config("hetero", "hrl", 2, ["workload.jobs=30", "workload.duration_h=2",
                                                  "workload.open_fraction=0.5"])
    try:
        DecisionPoint.residual_rows = check  # type: ignore[method-assign]
        simulate(cfg, scheduler=pol)
    finally:
        DecisionPoint.residual_rows = light  # type: ignore[method-assign]
    assert checked[0] > 30 and checked[1] > 10 and checked[2] > 10, checked  # choices, scored, with a half slot


def test_a_checkpoint_with_a_residual_loads_and_its_rules_only_ablation_drops_it(tmp_path: Path) -> None:
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common import checkpoint as common
    from hrlsched.agent.policy import SHIPPED, HRLScheduler
    from hrlsched.agent.residual import with_residual
    from hrlsched.errors import CheckpointError
    from hrlsched.experiments.ablation import rules_only

    ck = ckpt.load(shipped_checkpoint(SHIPPED))
    w = np.arange(9, dtype=float) / 10
    common.save(tmp_path / "r.pt", with_residual(ck, w))
    np.testing.assert_array_equal(HRLScheduler(tmp_path / "r.pt").residual, w)
    assert "residual" not in rules_only(with_residual(ck, w))
    # a file made before the arrived features: they weigh 0 (the same choices)
    old = with_residual(ck, w)
    old["residual"] = {"features": old["residual"]["features"][:7], "weights": old["residual"]["weights"][:7]}
    common.save(tmp_path / "old.pt", old)
    np.testing.assert_array_equal(HRLScheduler(tmp_path / "old.pt").residual, np.append(w[:7], [0.0, 0.0]))
    bad = with_residual(ck, w)
    bad["residual"] = {"features": ["d_workers"], "weights": [1.0]}
    common.save(tmp_path / "bad.pt", bad)
    with pytest.raises(CheckpointError, match="features"):
        HRLScheduler(tmp_path / "bad.pt")



def test_a_selector_learned_on_two_cases_is_saved_with_the_fixed_parts_and_resumes(tmp_path: Path) -> None:
    from hrlsched.agent.policy import HRLScheduler

    c = cfg(overrides=(), cases=("default@" + ",".join(SETS), "comm@" + ",".join(SETS)), learn=("selector",),
            method="cem", seeds_per_pair=2, sigma=2.0)
    st = train(c, tmp_path / "s")
    assert st.theta.shape == (PARTS["selector"],) and set(st.rules_held) == {f"{x}|100" for x in c.cases}
    if (tmp_path / "s" / "best.pt").is_file():
        agent = HRLScheduler(tmp_path / "s" / "best.pt")
        assert agent.selector is not None and agent.residual is None
    again = train(c, tmp_path / "s", resume=True)
    np.testing.assert_array_equal(again.theta, st.theta)


def test_the_selector_takes_a_heuristic_where_its_score_is_positive(tmp_path: Path) -> None:
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common import checkpoint as common
    from hrlsched.agent.policy import SHIPPED, HRLScheduler
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES, with_selector
    from hrlsched.config import resolve_run_config
    from hrlsched.errors import CheckpointError
    from hrlsched.experiments.ablation import rules_only
    from hrlsched.policies.registry import make_scheduler
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    ck = ckpt.load(shipped_checkpoint(SHIPPED))
    w = np.zeros((len(SELECTOR_POLICIES), len(SELECTOR_FEATURES)))
    w[0, 0] = 1.0  # optimus+pack at every point
    common.save(tmp_path / "s.pt", with_selector(ck, w))
    agent = HRLScheduler(tmp_path / "s.pt")
    b = build_scenario(resolve_run_config("default", "hrl", 101, list(SETS)).scenario, 101)

    def jct(s: object) -> float:
        res = Simulator(b.topology, b.jobs, b.perf, s, b.engine, seed=101, predictor=b.predictor).run()
        return float(np.nanmean(res.finish_s - np.array([j.arrival_s for j in res.jobs])))

    got = jct(agent)
    assert agent.selector is not None and agent.selector.taken[0] == agent.selector.points > 0
    # (the agent's recheck_s adds points where Optimus repeats itself: the same runs but for float rounding)
    assert got == pytest.approx(jct(make_scheduler("optimus+pack")), rel=1e-9)
    assert "selector" not in rules_only(with_selector(ck, w))
    bad = with_selector(ck, w)
    bad["selector"]["weights"] = [[1.0]]
    common.save(tmp_path / "bad.pt", bad)
    with pytest.raises(CheckpointError, match="selector weights"):
        HRLScheduler(tmp_path / "bad.pt")


def test_a_run_starts_from_the_learned_parts_of_its_init() -> None:
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.es import _start
    from hrlsched.agent.policy import SHIPPED
    from hrlsched.agent.selector import SELECTOR_POLICIES, with_selector

    ck = with_selector(ckpt.load(shipped_checkpoint(SHIPPED)), None)
    assert not _start(ck, ("residual", "selector"), "x").any()
    w = np.arange(PARTS["selector"], dtype=float).reshape(len(SELECTOR_POLICIES), -1)
    got = _start(with_selector(ck, w), ("residual", "selector"), "x")
    np.testing.assert_array_equal(got, np.concatenate([np.zeros(PARTS["residual"]), w.ravel()]))


def test_a_selector_saved_with_fewer_features_loads_with_the_others_at_zero() -> None:
    """A checkpoint made before ``idle`` and ``moves`` existed names five
    features, and one made before the fourth heuristic three policies: it
    loads with the missing ones weighted 0 (the same choices); an unknown
    feature or policy is refused, naming the file."""
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES, selector_weights
    from hrlsched.errors import CheckpointError

    old = {"selector": {"policies": list(SELECTOR_POLICIES[:3]), "features": ["bias", "free_gpus", "queued", "demand", "new"],
                        "weights": [[1.0, 2.0, 3.0, 4.0, 5.0]] * 3}}
    w = selector_weights(old)
    assert w is not None and w.shape == (len(SELECTOR_POLICIES), len(SELECTOR_FEATURES))
    np.testing.assert_array_equal(w[:3, :5], [[1.0, 2.0, 3.0, 4.0, 5.0]] * 3)
    assert not w[:, 5:].any() and not w[3:].any()  # a policy it does not name: never taken
    old["selector"]["policies"][1] = "fifo+pack"
    with pytest.raises(CheckpointError, match="x.pt: its selector"):
        selector_weights(old, "x.pt")
    old["selector"]["policies"][1] = SELECTOR_POLICIES[1]
    old["selector"]["features"][1] = "load"
    with pytest.raises(CheckpointError, match="x.pt: its selector"):
        selector_weights(old, "x.pt")


def test_the_point_features_read_the_agents_own_decision() -> None:
    """``idle`` is the share of GPUs the agent's own decision leaves free,
    ``moves`` the share of active jobs it starts, stops or moves."""
    from hrlsched.agent.rules import RulesScheduler
    from hrlsched.agent.selector import SELECTOR_FEATURES, point_features
    from hrlsched.config import resolve_run_config
    from hrlsched.contract import Decision
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulation

    b = build_scenario(resolve_run_config("default", "hrl", 101, list(SETS)).scenario, 101)
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
    rules = RulesScheduler()
    rules.reset(b.topology, np.random.default_rng(0))
    view = sim.reset(101)
    while view is not None and not any(p is not None for p in view.placements):
        view = sim.step(rules.decide(view)).view
    assert view is not None
    idle, moves = SELECTOR_FEATURES.index("idle"), SELECTOR_FEATURES.index("moves")
    keep = Decision(placements={j.job_id: p for j, p in zip(view.jobs, view.placements) if p is not None})
    f = point_features(view, keep)
    assert f[moves] == 0.0 and f[idle] == pytest.approx(float(np.mean(view.gpu_tasks == 0)))
    f = point_features(view, Decision())  # everything stopped: every running job moves, every GPU idle
    assert f[idle] == 1.0 and f[moves] == pytest.approx(float(np.mean(view.running)))


def test_arrived_is_the_demand_that_arrived_within_the_window() -> None:
    """``arrived``: the GPUs requested by the active jobs that arrived within
    ``ARRIVED_WINDOW_S`` of the point, over the cluster's, capped at 1; a job
    exactly at the window's edge counts, one just before it does not."""
    import dataclasses

    from hrlsched.agent.selector import ARRIVED_WINDOW_S, SELECTOR_FEATURES, point_features
    from hrlsched.config import resolve_run_config
    from hrlsched.contract import Decision
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulation

    b = build_scenario(resolve_run_config("default", "hrl", 101, list(SETS)).scenario, 101)
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
    view = sim.reset(101)
    assert view is not None and len(view.jobs) >= 1
    i = SELECTOR_FEATURES.index("arrived")
    gpus = view.gpu_tasks.size
    t = 5 * ARRIVED_WINDOW_S
    jobs = [dataclasses.replace(j, arrival_s=t - ARRIVED_WINDOW_S - 1.0) for j in view.jobs]
    assert point_features(dataclasses.replace(view, time_s=t, jobs=jobs), Decision())[i] == 0.0
    jobs[0] = dataclasses.replace(jobs[0], arrival_s=t - ARRIVED_WINDOW_S)
    f = point_features(dataclasses.replace(view, time_s=t, jobs=jobs), Decision())
    assert f[i] == pytest.approx(min(1.0, jobs[0].requested_gpus / gpus)) and f[i] > 0
    big = [dataclasses.replace(j, arrival_s=t, requested_gpus=2 * gpus) for j in view.jobs]
    assert point_features(dataclasses.replace(view, time_s=t, jobs=big), Decision())[i] == 1.0


def test_recent_is_the_selectors_memory_of_its_own_choices() -> None:
    """``recent`` halves at each point and gains 1 where a heuristic was
    taken: with bias 1 and recent -1.5 the selector takes a heuristic at
    every other point of the same view; a reset forgets."""
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES, Selector
    from hrlsched.config import resolve_run_config
    from hrlsched.contract import Decision
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulation

    b = build_scenario(resolve_run_config("default", "hrl", 101, list(SETS)).scenario, 101)
    view = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor).reset(101)
    assert view is not None
    w = np.zeros((len(SELECTOR_POLICIES), len(SELECTOR_FEATURES)))
    w[0, SELECTOR_FEATURES.index("bias")], w[0, SELECTOR_FEATURES.index("recent")] = 1.0, -1.5
    sel = Selector(w)
    sel.reset(b.topology)
    own = Decision()
    assert [sel.choose(view, own) for _ in range(6)] == [0, -1, 0, -1, 0, -1]
    sel.reset(b.topology)
    assert sel.recent == 0.0 and sel.choose(view, own) == 0


def test_a_run_from_learned_weights_measures_them_first_and_best_must_beat_them(tmp_path: Path) -> None:
    """Iteration 0 of the curve is the starting checkpoint on the held-back
    seeds; best.pt starts as it (its weights, its gain) and is replaced only
    by an iteration that beats it."""
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common.shipped import shipped_checkpoint
    from hrlsched.agent.es import learned_parts
    from hrlsched.agent.policy import SHIPPED

    start = learned_parts(ckpt.load(shipped_checkpoint(SHIPPED)))["selector"]
    assert start is not None and np.any(start)  # the shipped agent carries a selector
    st = train(cfg(learn=("selector",), iterations=1, placement="migrate"), tmp_path / "a")
    first, last = st.curve[0], st.curve[-1]
    assert first["iteration"] == 0 and first["train_gain_pct"] is None and first["held_back_gain_pct"] is not None
    assert [r["iteration"] for r in st.curve] == [0, 1]
    best = ckpt.load(tmp_path / "a" / "best.pt")
    assert st.best_gain == max(first["held_back_gain_pct"], last["held_back_gain_pct"])
    assert best["iteration"] == (1 if last["held_back_gain_pct"] > first["held_back_gain_pct"] else 0)
    if best["iteration"] == 0:  # the start stands: its own weights
        np.testing.assert_allclose(np.ravel(learned_parts(best)["selector"]), np.ravel(start), rtol=0, atol=1e-6)
    assert (tmp_path / "a" / "curve.csv").read_text().splitlines()[1].startswith("0,0,")
    assert (tmp_path / "a" / "curve.png").is_file()


def test_rank_fitness_counts_each_workload_alike_and_ties_share_their_rank() -> None:
    from hrlsched.agent.es import case_gains, fitness, worst_loss

    # three samples on two workloads: large noisy gains on the first, a small steady one on the second
    gains = np.array([[3.0, -0.1], [2.9, 0.0], [-1.0, 0.0]])
    np.testing.assert_allclose(fitness(gains, "mean"), [1.45, 1.45, -0.5])
    # ranks: sample 0 best on the first (1.0) but worst on the second (0.0); samples 1 and 2 tie there (0.75 each)
    np.testing.assert_allclose(fitness(gains, "ranks"), [0.5, (0.5 + 0.75) / 2, (0.0 + 0.75) / 2])
    # the shape of the pairs is kept: (pairs, +/-, workloads) -> (pairs, +/-)
    assert fitness(np.zeros((4, 2, 3)), "ranks").shape == (4, 2)
    by_case = case_gains(["a", "b", "a", "b", "c", "c"], np.array([1.0, -2.0, 3.0, -2.0, -1.0, 1.2]))
    assert by_case["a"][0] == 2.0 and by_case["a"][1] > 1.0
    assert by_case["b"] == (-2.0, 0.0)  # a trace replayed: one gain, an interval of no width
    # b loses beyond its interval by 2; c's mean is below 0 but within its interval
    assert worst_loss(by_case) == -2.0 and worst_loss({"c": by_case["c"]}) == 0.0
    with pytest.raises(ValueError, match="fitness"):
        cfg(fitness="median")
    with pytest.raises(ValueError, match="select"):
        cfg(select="best")


def test_worst_case_selection_records_each_case_on_the_held_back_seeds(tmp_path: Path) -> None:
    cases = ("default@" + ",".join(SETS), "default@workload.jobs=5,workload.duration_h=0.3")
    st = train(cfg(overrides=(), cases=cases, select="worst-case", held_back=(100, 101), iterations=1), tmp_path / "a")
    row = st.curve[-1]
    assert set(row["held_back_by_case"]) == set(cases)
    assert row["held_back_worst_case_pct"] == min(row["held_back_by_case"].values())
    assert row["held_back_worst_loss_pct"] <= 0.0
    if row["held_back_worst_case_pct"] >= 0:
        assert row["held_back_worst_loss_pct"] == 0.0
    # from the rules (no learned start): best.pt only where the score beats the rules' (0, 0)
    score = (row["held_back_worst_loss_pct"], row["held_back_gain_pct"])
    beats = score > (0.0, 0.0)
    assert (st.best_worst_loss, st.best_gain) == (score if beats else (0.0, 0.0))
    assert (tmp_path / "a" / "best.pt").is_file() == beats
    assert row["held_back_gain_pct"] == pytest.approx(np.mean(list(row["held_back_by_case"].values())))
    assert "held_back_worst_case" in (tmp_path / "a" / "curve.csv").read_text().splitlines()[0]
