"""``lookahead``: the rollout planner over the rules (agent/lookahead.py)."""

import numpy as np
import pytest

from hrlsched.agent.lookahead import LookaheadConfig, LookaheadScheduler
from hrlsched.agent.rules import RulesScheduler
from hrlsched.config import resolve_run_config
from hrlsched.policies.registry import make_scheduler
from hrlsched.scenario import build_scenario
from hrlsched.sim.engine import Simulator

SETS = ["workload.jobs=20", "workload.duration_h=1"]


def run(policy: str, seed: int = 3, scenario: str = "default", sets: list[str] = SETS) -> tuple[float, object]:
    cfg = resolve_run_config(scenario, policy, seed, sets)
    b = build_scenario(cfg.scenario, seed)
    sched = make_scheduler(policy)
    res = Simulator(b.topology, b.jobs, b.perf, sched, b.engine, seed=seed, predictor=b.predictor,
                    sample_jobs=b.sample_jobs).run()
    assert not np.isnan(res.finish_s).any()
    arrival = np.array([j.arrival_s for j in res.jobs])
    return float(np.mean(res.finish_s - arrival)), sched


def test_without_alternatives_it_is_the_rules_to_the_bit() -> None:
    rules, _ = run("optimus-tuned")
    got, la = run("lookahead/targets=0/policies=/placements=")
    assert got == rules and la.stats.evaluated == 0 and la.stats.rollouts == 0


def test_a_rollout_of_the_rules_decision_is_what_the_rules_then_do() -> None:
    """The value a lookahead gives the rules' decision at a point is the
    job-seconds the rules' own run then accumulates, to the bit."""
    cfg = resolve_run_config("default", "optimus-tuned", 5, SETS)
    b = build_scenario(cfg.scenario, 5)
    rules = RulesScheduler()
    sim = Simulator(b.topology, b.jobs, b.perf, rules, b.engine, seed=5, predictor=b.predictor).simulation
    rules.reset(b.topology, np.random.default_rng(5))
    la = LookaheadScheduler()
    la.reset(b.topology, np.random.default_rng(5))
    view = sim.reset(5)
    for _ in range(12):
        view = sim.step(rules.decide(view)).view
    la.bind(sim)
    d = rules.decide(view)
    predicted = la._rollout(d)
    total = 0.0
    while view is not None:
        out = sim.step(d)
        total += out.job_seconds
        view = out.view
        d = rules.decide(view) if view is not None else d
    assert predicted == total


def test_it_is_never_worse_than_the_rules_it_rolls_out() -> None:
    # the rollout algorithm's improvement: here the rules decide on the state alone
    for seed in (3, 4):
        rules, _ = run("optimus-tuned", seed)
        got, la = run("lookahead/every=2", seed)
        assert got <= rules + 1e-6
        assert la.stats.evaluated > 0 and la.stats.rollouts > la.stats.evaluated


def test_levels_try_their_own_alternatives() -> None:
    _, l1 = run("lookahead/level=allocation/every=2")
    _, l2 = run("lookahead/level=placement")
    assert not any(k.startswith("placement") for k in l1.stats.by_kind)
    assert l2.stats.by_kind and all(k.startswith("placement") for k in l2.stats.by_kind)


@pytest.mark.slow  # (minutes: its time is about the square of the lookahead's)
def test_iterated_lookahead_improves_on_the_lookahead() -> None:
    sets = ["workload.jobs=8", "workload.duration_h=0.5"]
    one, _ = run("lookahead/every=2/policies=srtf+pack/placements=", 2, sets=sets)
    got, la = run("lookahead/depth=2/every=2/policies=srtf+pack/placements=", 2, sets=sets)
    assert got <= one + 1e-6 and la.stats.rollouts > 0


def test_settings_text_round_trips_and_bad_values_name_the_field() -> None:
    c = LookaheadConfig.parse("level=allocation/every=4/resize=0.5:3/policies=srtf+pack/horizon_s=7200")
    assert c.level == "allocation" and c.every == 4 and c.resize == (0.5, 3.0) and c.horizon_s == 7200.0
    assert LookaheadConfig.parse(c.text()) == c
    assert make_scheduler(f"lookahead/{c.text()}").name == f"lookahead/{c.text()}"
    for bad, word in (("level=both2", "level"), ("every=0", "every"), ("resize=1", "resize"), ("nope=1", "nope"),
                      ("policies=nosuch", "nosuch"), ("placements=pack:nosuch", "placements"), ("depth=3", "depth"),
                      ("futures=-1", "futures"), ("observe=2", "observe")):
        with pytest.raises(ValueError, match=word):
            make_scheduler(f"lookahead/{bad}")
    with pytest.raises(ValueError, match="takes no settings"):
        make_scheduler("fifo/x=1")


def test_a_policy_with_settings_of_its_own_is_one_of_the_policies() -> None:
    """``policies=optimus+pack:optimus-tuned+migrate/f=0/every=8``: ``f=0``
    belongs to the policy before it, ``every`` is the lookahead's; the text
    round-trips, and so does the name ``headroom`` makes."""
    from hrlsched.experiments.headroom import lookahead_policy

    c = LookaheadConfig.parse("policies=optimus+pack:optimus-tuned+migrate/f=0/every=8/place=migrate")
    assert c.policies == ("optimus+pack", "optimus-tuned+migrate/f=0") and c.every == 8 and c.place == "migrate"
    assert LookaheadConfig.parse(c.text()) == c
    name = lookahead_policy("allocation", c.text(), "every=4")
    assert make_scheduler(name).config == LookaheadConfig.parse(c.text().replace("every=8", "every=4") + "/level=allocation")
    with pytest.raises(ValueError, match="zz"):
        LookaheadConfig.parse("policies=optimus-tuned/zz=1")
    with pytest.raises(ValueError, match="lookahead setting 'f=0'"):
        LookaheadConfig.parse("every=2/f=0")


def test_place_sets_the_rules_it_starts_from_and_rolls_out_with() -> None:
    rules, _ = run("optimus-tuned+migrate")
    got, la = run("lookahead/targets=0/policies=/placements=/place=migrate")
    assert got == rules and la.rules.name == "optimus-tuned+migrate"
    with pytest.raises(ValueError, match="place"):
        make_scheduler("lookahead/place=nosuch")


def test_it_refuses_to_decide_outside_a_simulator() -> None:
    la = make_scheduler("lookahead")
    cfg = resolve_run_config("default", "lookahead", 0, SETS)
    b = build_scenario(cfg.scenario, 0)
    from hrlsched.sim.simulation import Simulation

    sim = Simulation(b.topology, b.jobs, b.perf, b.engine)
    la.reset(b.topology, np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="Simulator"):
        la.decide(sim.reset(0))


def test_sampled_futures_replace_the_arrivals_and_repeat() -> None:
    """``futures=k``: each decision is rolled out on k sampled futures (k
    rollouts per alternative), the same for a run repeated; the values it
    records differ from the real future's."""
    sets = ["workload.jobs=12", "workload.duration_h=0.5"]
    name = "lookahead/level=allocation/every=2/futures=2/policies=srtf+pack"
    got, la = run(name, sets=sets)
    again, la2 = run(name, sets=sets)
    real, la0 = run("lookahead/level=allocation/every=2/policies=srtf+pack", sets=sets)
    assert got == again and la.stats.records == la2.stats.records
    assert la.stats.evaluated > 0
    alts = sum(len(r["alternatives"]) + 1 for r in la.stats.records)
    assert la.stats.rollouts == 2 * alts
    assert [r["base"] for r in la.stats.records] != [r["base"] for r in la0.stats.records[: len(la.stats.records)]]


def test_sampled_futures_need_the_scenarios_workload() -> None:
    cfg = resolve_run_config("default", "optimus-tuned", 0, SETS)
    b = build_scenario(cfg.scenario, 0)
    sched = make_scheduler("lookahead/futures=2")
    with pytest.raises(RuntimeError, match="workload to sample"):
        Simulator(b.topology, b.jobs, b.perf, sched, b.engine, seed=0, predictor=b.predictor).run()


def test_a_forced_alternative_records_what_the_scorer_reads_of_its_job() -> None:
    """Each alternative that forces a job's slot carries that job's candidate
    rows (the rules' slot, the forced one) and the cluster row; a whole
    other decision carries none."""
    from hrlsched.envs.features import CANDIDATE, CANDIDATE_FEATURES, CLUSTER_FEATURES

    _, la = run("lookahead/level=allocation/every=2/observe=1")
    forced = ("hold", "start", "workers x", "arch/mode")
    seen = 0
    for rec in la.stats.records:
        assert len(rec["jobs_read"]) == len(rec["alternatives"])
        for (kind, _), job in zip(rec["alternatives"], rec["jobs_read"]):
            assert (job is not None) == kind.startswith(forced)
            if job is None:
                continue
            seen += 1
            assert len(job["rules"]) == len(job["alt"]) == len(CANDIDATE_FEATURES)
            assert len(job["cluster"]) == len(CLUSTER_FEATURES)
            assert job["rules"] != job["alt"]
            if kind == "hold":
                assert job["alt"][CANDIDATE["is_wait"]] == 1.0 and job["rules"][CANDIDATE["is_wait"]] == 0.0
    assert seen > 0
