"""The agent's level 2 as a choice among candidate placements (agent/placement_choice.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from hrlsched.agent.common.shipped import shipped_checkpoint
from hrlsched.agent.placement_choice import PLACEMENT_FEATURES, PlacementChoice  # noqa: E402
from hrlsched.core.placement import Placement  # noqa: E402
from tests.conftest import small_spec  # noqa: E402
from tests.helpers import job, make_view  # noqa: E402

SETS = ("workload.jobs=12", "workload.duration_h=0.3")
CASE = "default@" + ",".join(SETS)


def _jct(res: object) -> float:
    return float(np.mean(res.finish_s - np.array([j.arrival_s for j in res.jobs])))  # type: ignore[attr-defined]


def _agent(weights: np.ndarray | None, choice: type[PlacementChoice] = PlacementChoice) -> object:
    """The shipped agent with its free scorer silenced (its rules) and this placement choice."""
    import torch

    from hrlsched.agent.policy import HRLScheduler

    a = HRLScheduler()
    with torch.no_grad():
        a.net.cand[2].weight.zero_()
        a.net.cand[2].bias.zero_()
    a.selector = None  # the shipped agent's point selector off: the rules, placed by the choice
    a.placement = None if weights is None else choice(weights)
    return a


def _run(sched: object, seed: int = 101, scenario: str = "default") -> object:
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    b = build_scenario(resolve_run_config(scenario, "hrl", seed, list(SETS)).scenario, seed)
    return Simulator(b.topology, b.jobs, b.perf, sched, b.engine, seed=seed, predictor=b.predictor).run()


def test_weights_too_small_to_pass_the_prior_are_pack_to_the_bit() -> None:
    from hrlsched.agent.rules import RulesScheduler

    rules = _run(RulesScheduler())  # optimus-tuned: the rules placed by pack
    agent = _agent(np.full(len(PLACEMENT_FEATURES), 1e-9))  # every feature computed, none passes pack's margin
    got = _run(agent)
    np.testing.assert_array_equal(got.finish_s, rules.finish_s)  # type: ignore[attr-defined]
    pc = agent.placement  # type: ignore[attr-defined]
    assert pc.choices > 0 and pc.departed == 0
    # weights that pass it place elsewhere
    moved = _agent(np.array([0.0, -3.0, -3.0, 0.0, 0.0, 2.0]))
    _run(moved)
    assert moved.placement.departed > 0  # type: ignore[attr-defined]


def test_the_candidates_hold_each_heuristics_placement_exactly() -> None:
    from hrlsched.policies.placement.balance import BalancePlacement
    from hrlsched.policies.placement.interference_aware import TopologyPlacement
    from hrlsched.policies.placement.pack import PackPlacement

    seen = {"points": 0}

    class Checked(PlacementChoice):
        def choose(self, dp, job, pl):  # noqa: ANN001, ANN202
            cands = self.candidates(dp, job, pl)
            keys = [c.canonical() for c in cands.placements]
            assert len(set(keys)) == len(keys)
            occ, w, p = dp.board.occ, pl.n_workers, pl.n_ps
            for name, pol in (("pack", PackPlacement()), ("balance", BalancePlacement()),
                              ("topology", TopologyPlacement())):
                got = pol.place_job(dp.view, occ, job, w, p)
                i = keys.index(got.canonical())
                assert name in cands.sources[i]
            assert cands.placements[0] == pl and "pack" in cands.sources[0]
            # topology's whole candidate set as it builds it alone (its pack and balance made anew)
            made = [c.canonical() for c in TopologyPlacement()._candidates(dp.view, occ, job, w, p)]
            assert [k for i, k in enumerate(keys) if "topology" in cands.sources[i]] == made
            seen["points"] += 1
            return super().choose(dp, job, pl)

    _run(_agent(np.array([0.0, -1.0, -1.0, 0.0, 0.0, 0.0]), Checked), scenario="ps-small")
    assert seen["points"] > 0


@pytest.mark.parametrize("noisy", [False, True])
def test_speeds_beside_skips_only_what_shares_nothing_to_the_bit(noisy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The analytic model's ``speeds_beside`` solves only the candidates that share a GPU, socket or
    link with the neighbours (elsewhere the neighbours keep their speeds alone and the job has its
    own alone). At every call of a run of the hetero agent (a burst of arrivals on a 128-GPU
    cluster; ``hetero`` with a noisy predictor over the model) it gives what solving every
    candidate with them gives (``PerformanceModel.speeds_beside``), to the bit."""
    import hrlsched.agent.placement_choice as pc
    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.config import resolve_run_config
    from hrlsched.perf.analytic import AnalyticModel
    from hrlsched.perf.base import PerformanceModel
    from hrlsched.run import simulate
    from hrlsched.sim.predictor import NoisyPredictor

    cls = NoisyPredictor if noisy else AnalyticModel
    fast, solve = cls.speeds_beside, AnalyticModel.speeds_apart
    seen = {"calls": 0, "candidates": 0, "solved": 0}

    def check(self, others, job, pls):  # noqa: ANN001, ANN202
        n0 = seen["solved"]
        got = fast(self, others, job, pls)
        seen["candidates"] += len(pls)
        seen["calls"] += 1
        solved = seen["solved"] - n0
        want = PerformanceModel.speeds_beside(self, others, job, pls)
        seen["solved"] = n0 + solved  # (the slow path's solves not counted)
        np.testing.assert_array_equal(got[0], want[0])
        assert len(got[1]) == len(want[1]) == len(pls)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_array_equal(a, b)
        return got

    def counted(self, groups):  # noqa: ANN001, ANN202
        seen["solved"] += max(len(groups) - 1, 0)
        return solve(self, groups)

    monkeypatch.setattr(cls, "speeds_beside", check)
    monkeypatch.setattr(AnalyticModel, "speeds_apart", counted)
    sets = ["workload.jobs=30", "workload.duration_h=2", "predictor.noise=0.3"] if noisy else \
        ["cluster.server_groups.0.count=16", "workload.jobs=60", "workload.duration_h=0.01"]
    cfg = resolve_run_config("hetero" if noisy else "default", "hrl", 3, sets)
    simulate(cfg, scheduler=HRLScheduler(str(Path(pc.__file__).parent / "checkpoints" / "hrl-hetero.pt")))
    assert seen["calls"] > 20, seen
    if not noisy:  # the burst: candidates apart from every neighbour, and beside one
        assert 0 < seen["solved"] < seen["candidates"], seen


def test_features_on_a_hand_checked_point() -> None:
    from hrlsched.agent.rules import agent_point
    from hrlsched.cluster import Topology
    from hrlsched.core import CATALOGUE
    from hrlsched.perf.analytic import AnalyticModel

    topo = Topology.from_spec(small_spec(3))  # 3 servers of 8 GPUs (2 sockets x 2 switches x 2 GPUs)
    perf = AnalyticModel(topo, CATALOGUE)
    b, a, d = job(1, gpus=4, arch="allreduce"), job(2, gpus=5, arch="allreduce"), job(3, gpus=2, arch="allreduce")
    pa, pd = Placement.of([0, 1, 2, 3, 4]), Placement.of([8, 12])
    view = make_view(topo, perf, [b, a, d], [None, pa, pd])
    dp = agent_point(topo, None)
    dp.reset(np.random.default_rng(0))
    assert dp.begin(view) and dp.k == 0  # job 1's choice; jobs 2 and 3 run, not decided yet
    pack = dp.feas.place(view, dp.board, b, 4, 0)
    assert set(topo.gpu_server[list(pack.gpus)]) == {1}  # best fit: server 1 (6 free) before server 2 (8)
    # the jobs decided so far on server 1's switch uplinks and QPI: 2 each (none elsewhere)
    shared = (dp.link_kind == 1) | (dp.link_kind == 2)
    links = np.flatnonzero(shared)
    on1 = np.array([topo.switch_server[x - dp.link_off[1]] == 1 if dp.link_kind[x] == 1 else x - dp.link_off[2] == 1
                    for x in links])
    dp.board.link_jobs[links[on1]] = 2
    pc = PlacementChoice(np.ones(len(PLACEMENT_FEATURES)))
    cands = pc.candidates(dp, b, pack)
    assert len(cands.placements) == 2 and cands.sources[1] == {"balance", "topology"}
    bal = cands.placements[1]
    assert set(topo.gpu_server[list(bal.gpus)]) == {2}  # the emptiest server
    f = pc.features(dp, b, cands)
    assert not f[0].any()  # pack's: the reference
    # neighbours of servers 1 and 2: job 3 alone (job 2 is on server 0)
    sp0 = perf.speeds([d], [pd])[0]
    with_b = perf.speeds([d, b], [pd, pack])
    top = max(perf.alone_speed(b, pack), perf.alone_speed(b, bal))
    alone = perf.speeds([d, b], [pd, bal])
    suffered = 10 * (1 - alone[1] / top) - 10 * (1 - with_b[1] / top)
    caused = 10 * (1 - alone[0] / sp0) - 10 * (1 - with_b[0] / sp0)
    np.testing.assert_allclose(f[1], [0.0, suffered, caused, -2.0, 1.0, 1.0])
    assert suffered < 0 and caused < 0  # alone on server 2, it neither suffers nor causes job 3's pressure


def test_a_point_chooses_for_its_first_jobs_only_and_gives_the_others_packs() -> None:
    from collections import Counter

    priced: Counter = Counter()
    past: list[tuple[int, bool]] = []
    firsts: dict[str, list] = {"capped": [], "free": []}

    def counted(cap: int, seen: list) -> type[PlacementChoice]:
        class Counted(PlacementChoice):
            def __init__(self, w: np.ndarray) -> None:
                super().__init__(w, priced_per_point=cap)

            def choose(self, dp, job, pl):  # noqa: ANN001, ANN202
                capped = self.capped
                out = super().choose(dp, job, pl)
                if self.capped > capped:
                    past.append((dp.decisions, out is pl))  # pack's, as it came
                else:
                    priced[(id(self), id(dp.view), dp.decisions)] += 1
                    seen.append((dp.decisions, job.job_id, out.canonical()))
                return out
        return Counted

    w = np.array([0.0, -3.0, -3.0, 0.0, 0.0, 2.0])
    capped = _agent(w, counted(1, firsts["capped"]))
    first_run = _run(capped, scenario="ps-small")
    pc = capped.placement  # type: ignore[attr-defined]
    assert pc.capped > 0 and all(p for _, p in past) and max(priced.values()) == 1
    # a second episode of the same scheduler starts its points afresh (reset): the same run again
    n_seen, n_past = len(firsts["capped"]), len(past)
    np.testing.assert_array_equal(_run(capped, scenario="ps-small").finish_s, first_run.finish_s)  # type: ignore[attr-defined]
    del firsts["capped"][n_seen:], past[n_past:]
    # without a cap, the same choices up to the first point that capped one, and its first job's
    _run(_agent(w, counted(10_000, firsts["free"])), scenario="ps-small")
    d0 = min(d for d, _ in past)
    before = [x for x in firsts["free"] if x[0] < d0] + [next(x for x in firsts["free"] if x[0] == d0)]
    assert firsts["capped"][:len(before)] == before
    with pytest.raises(ValueError, match="priced_per_point"):
        PlacementChoice(w, priced_per_point=0)


def test_a_checkpoint_carries_the_weights_its_ablation_drops_them_and_bad_ones_are_named(tmp_path: Path) -> None:
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common import checkpoint as common
    from hrlsched.agent.placement_choice import placement_weights, with_placement
    from hrlsched.agent.policy import SHIPPED, HRLScheduler
    from hrlsched.commands.checkpoint import describe
    from hrlsched.errors import CheckpointError
    from hrlsched.experiments.ablation import rules_only

    ck = ckpt.load(shipped_checkpoint(SHIPPED))
    assert HRLScheduler().placement is None  # the shipped agent: pack
    w = np.arange(len(PLACEMENT_FEATURES), dtype=float) / 10
    common.save(tmp_path / "p.pt", with_placement(ck, w))
    np.testing.assert_array_equal(HRLScheduler(tmp_path / "p.pt").placement.weights, w)  # type: ignore[union-attr]
    assert describe(with_placement(ck, w))["placement"] == dict(zip(PLACEMENT_FEATURES, w.tolist()))
    assert "placement" not in rules_only(with_placement(ck, w))
    assert placement_weights(rules_only(with_placement(ck, w))) is None
    for bad, match in (({"features": ["servers"], "weights": [1.0]}, "placement's features"),
                       ({"features": list(PLACEMENT_FEATURES), "weights": [1.0]}, "placement weights"),
                       ({"features": list(PLACEMENT_FEATURES), "weights": [float("nan")] * 6}, "placement weights"),
                       ({"features": list(PLACEMENT_FEATURES), "weights": "x"}, "placement weights")):
        common.save(tmp_path / "bad.pt", {**ck, "placement": bad})
        with pytest.raises(CheckpointError, match=match):
            HRLScheduler(tmp_path / "bad.pt")


def test_es_learns_the_placement_part(tmp_path: Path) -> None:
    from hrlsched.agent.es import PARTS, ESConfig, _episode, train
    from hrlsched.agent.policy import HRLScheduler

    rules = _episode(None, CASE, 101, None)
    # zero weights on every part the shipped agent has are the rules (a part not learned stays the init's)
    assert _episode(None, CASE, 101, np.zeros(len(PLACEMENT_FEATURES) + PARTS["selector"]), ("placement", "selector")) == rules
    c = ESConfig(scenario="default", overrides=SETS, iterations=1, pairs=1, seeds_per_pair=1, eval_every=1,
                 held_back=(100,), workers=1, method="cem", learn=("placement",), sigma=2.0)
    st = train(c, tmp_path / "p")
    assert st.theta.shape == (len(PLACEMENT_FEATURES),) and st.iteration == 1
    if (tmp_path / "p" / "best.pt").is_file():
        agent = HRLScheduler(tmp_path / "p" / "best.pt")
        assert agent.placement is not None and agent.residual is None


def test_the_level_2_target_reads_the_paired_difference_and_the_interference_cost() -> None:
    from hrlsched.experiments.evaluate import _placement_line, placement_target

    best = np.array([100.0, 110.0, 90.0])
    jct = {"rules+topology": best, "rules+topology@no-interference": best * 0.96, "rules+learned": best * 0.995}
    p = placement_target(jct, "rules+topology", "rules+learned", "pack")
    assert p["interference_cost"] == pytest.approx(0.04) and p["required"] == "1% better"
    assert not p["holds"] and "MISSED (by 0.5 points; no worse beyond the 95% interval: holds)" in _placement_line(p)  # 0.5% better where 1% is required
    jct["rules+topology@no-interference"] = best * 0.99  # interference costs 1%: no worse is enough
    p = placement_target(jct, "rules+topology", "rules+learned", "pack")
    assert p["holds"] and p["required"] == "no worse beyond the 95% interval" and p["wins"] == 3
    assert "hrl (= rules+learned) −" in _placement_line(placement_target({**jct, "hrl": best}, "rules+topology", "hrl", "pack"))
    assert "no learned placement choice" in _placement_line(placement_target(jct, "rules+topology", None, "pack"))
    # the rules-only row is named with the checkpoint's own placement (migrate for the shipped rules)
    jct.update({"rules-only": best, "rules-only@no-interference": best * 0.96})
    assert "cost rules-only (placed by migrate) (the best" in _placement_line(
        placement_target(jct, "rules-only", "rules+learned", "migrate"))
