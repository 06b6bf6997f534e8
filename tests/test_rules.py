"""``optimus-tuned``: the agent's rules as a heuristic of their own."""

import re
from pathlib import Path

import numpy as np
import pytest

from hrlsched.agent.common.shipped import shipped_checkpoint
from hrlsched.config import resolve_run_config
from hrlsched.policies.hint import SHIPPED, HintConfig
from hrlsched.policies.registry import make_scheduler
from hrlsched.run import simulate

SETS = ["workload.jobs=40", "workload.duration_h=2"]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_rules_alone_decide_as_the_agents_rules_only_ablation(tmp_path: Path, seed: int) -> None:
    """The shipped checkpoint with its learned parts silenced and its rules
    as a heuristic (``optimus-tuned``, with the checkpoint's placement:
    ``rules_heuristic``; no network) give the same run, to the bit."""
    pytest.importorskip("torch")
    from hrlsched.experiments import ablation, learned

    path = ablation.ablated_checkpoints(learned.shipped_checkpoint(), tmp_path)[ablation.RULES_ONLY]
    rules = ablation.rules_heuristic(learned.load(learned.shipped_checkpoint()))
    assert rules.startswith("optimus-tuned")
    a = simulate(resolve_run_config("default", "hrl", seed, [*SETS, f"checkpoint={path}"]))
    b = simulate(resolve_run_config("default", rules, seed, SETS))
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.restarts, b.restarts)
    assert learned.hint_of(learned.load(learned.shipped_checkpoint())) == SHIPPED  # the same rules


def test_a_silenced_scorer_is_not_run_and_decides_as_when_it_is() -> None:
    """The shipped agent's scorer learned nothing over its rules (its last layer is 0): the policy
    then skips the network (encoding and scoring), and its run is the same, to the bit, as with
    the network run."""
    torch = pytest.importorskip("torch")
    from hrlsched.agent.policy import CandidateScorer, HRLScheduler

    fast, slow = HRLScheduler(None), HRLScheduler(None)
    assert CandidateScorer(fast.net).silent
    slow._scorer = CandidateScorer(slow.net, slow.residual)
    slow._scorer.silent = False  # scored through the network, as before
    cfg = resolve_run_config("default", "hrl", 1, SETS)
    a, b = simulate(cfg, scheduler=fast), simulate(cfg, scheduler=slow)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.restarts, b.restarts)
    with torch.no_grad():
        slow.net.cand[2].bias.fill_(1e-3)
    assert not CandidateScorer(slow.net).silent


def test_rule_rows_are_what_the_rules_read_of_allocation_rows() -> None:
    """``DecisionPoint.rule_rows`` (what the rules decide on, alone) equals those columns of
    ``allocation_rows`` at every choice of a run, and the rules score them the same."""
    from hrlsched.agent.rules import _WORKERS, RulesScheduler, add_rules, rules_scores

    sched = RulesScheduler(SHIPPED)
    checked = [0, 0]

    def check(dp):  # noqa: ANN001, ANN202
        speed, hint, workers, ix = light(dp)
        _, _, _, base, dyn, ix2 = dp.allocation_rows()
        np.testing.assert_array_equal(ix, ix2)
        assert speed.dtype == dyn.dtype
        np.testing.assert_array_equal(speed, dyn[:, 0])
        np.testing.assert_array_equal(workers, base[:, _WORKERS])
        assert (hint >= 0) == bool(dyn[:, 4].any()) and (hint < 0 or dyn[hint, 4] == 1.0)
        zero = np.zeros(len(ix), dtype=dyn.dtype)
        np.testing.assert_array_equal(rules_scores(speed, hint, workers, ix, sched.gap, sched.bonus),
                                      add_rules(zero, dyn, base, ix, sched.gap, sched.bonus))
        checked[0] += 1
        checked[1] += hint >= 0 and int(ix[hint]) > 1 and bool((workers == workers[hint]).sum() > 1)
        return speed, hint, workers, ix

    from hrlsched.envs.decision import DecisionPoint

    light = DecisionPoint.rule_rows
    cfg = resolve_run_config("default", "fifo", 2, [*SETS, "workload.open_fraction=0.5"])
    try:
        DecisionPoint.rule_rows = check  # type: ignore[method-assign]
        simulate(cfg, scheduler=sched)
    finally:
        DecisionPoint.rule_rows = light  # type: ignore[method-assign]
    assert checked[0] > 50 and checked[1] > 10, checked  # choices, and ones where the gap rule compares slots


def test_without_the_rule_weights_it_is_the_hint_alone() -> None:
    from hrlsched.agent.rules import RulesScheduler
    from hrlsched.policies.base import ComposedScheduler
    from hrlsched.policies.registry import PLACEMENTS

    cfg = resolve_run_config("default", "fifo", 3, SETS)
    hint = HintConfig.parse("g=0,b=1", base=SHIPPED)  # the hint's slot always: its heuristic's choices
    a = simulate(cfg, scheduler=RulesScheduler(hint))
    b = simulate(cfg, scheduler=RulesScheduler(SHIPPED))
    assert make_scheduler("optimus-tuned").name == "optimus-tuned"
    assert not np.array_equal(a.finish_s, b.finish_s)  # the greedy rule changes choices
    c = simulate(cfg, scheduler=ComposedScheduler(hint.make_policy([1, 2, 4, 8, 16, 32]), PLACEMENTS["pack"].factory()))
    assert abs(float(np.mean(a.finish_s)) - float(np.mean(c.finish_s))) / float(np.mean(c.finish_s)) < 0.05
    with pytest.raises(ValueError, match="hint.policy"):
        RulesScheduler(HintConfig(policy=None))


def test_the_rules_with_other_hint_options_are_named_and_refused_clearly() -> None:
    """``optimus-tuned+migrate/f=0``: the rules with the shipped hint's keep
    threshold removed (its other options kept); bad options name the policy."""
    s = make_scheduler("optimus-tuned+migrate/f=0")
    assert s.name == "optimus-tuned+migrate/f=0" and s.placement == "migrate"
    assert s.hint.keep_frac == 0.0 and s.hint.remaining_weight == SHIPPED.remaining_weight != 0
    assert make_scheduler("optimus-tuned/a=1").placement == "pack"
    for bad, why in [("optimus-tuned/zz=1", "unknown setting"), ("optimus-tuned+nope/f=0", "unknown placement")]:
        with pytest.raises(ValueError, match=f"policy {re.escape(repr(bad))}.*{why}"):
            make_scheduler(bad)


def test_a_selector_taking_the_rules_without_keep_threshold_everywhere_is_them(tmp_path: Path) -> None:
    """The selector's fourth heuristic at every point gives that heuristic's
    run, to the bit (its decisions read the view alone), and it differs from
    the rules' own run: the threshold changes decisions."""
    pytest.importorskip("torch")
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common import checkpoint as common
    from hrlsched.agent.policy import SHIPPED as SHIPPED_PATH
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES, with_selector

    w = np.zeros((len(SELECTOR_POLICIES), len(SELECTOR_FEATURES)))
    w[SELECTOR_POLICIES.index("optimus-tuned+migrate/f=0"), SELECTOR_FEATURES.index("bias")] = 1.0
    common.save(tmp_path / "s.pt", with_selector(ckpt.load(shipped_checkpoint(SHIPPED_PATH)), w))
    sets = ["workload.jobs=60", "workload.duration_h=2"]
    a = simulate(resolve_run_config("default", "hrl", 4, [*sets, f"checkpoint={tmp_path / 's.pt'}"]))
    b = simulate(resolve_run_config("default", "optimus-tuned+migrate/f=0", 4, sets))
    c = simulate(resolve_run_config("default", "optimus-tuned+migrate", 4, sets))
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    assert not np.array_equal(b.finish_s, c.finish_s)


def test_priced_figures_are_shared_only_between_the_same_menus() -> None:
    """A second decision point on the same view (the selector's rules) reads the agent's priced
    figures only where both price the same menu on the same cluster size."""
    from hrlsched.envs.candidates import make_table
    from hrlsched.envs.pricing import Pricing

    a, b = Pricing(make_table((1, 2, 4), ("one", "half"), 16), 16), Pricing(make_table((1, 2, 4), ("one", "half"), 16), 16)
    a.workload.speeds[("m", 1, 0, 32)] = 1.5
    assert b.share(a) and b.workload.speeds is a.workload.speeds and b.workload.profiles is not a.workload.profiles
    for other in (Pricing(make_table((1, 2, 8), ("one", "half"), 16), 16), Pricing(make_table((1, 2, 4), ("one",), 16), 16),
                  Pricing(make_table((1, 2, 4), ("one", "half"), 16), 32)):
        assert not other.share(a) and other.workload.speeds is not a.workload.speeds



def test_no_garbage_collection_inside_a_decision() -> None:
    """The agent defers cyclic collection to after each decision (a full one is a latency of its
    own), and leaves the collector as it found it."""
    import gc

    pytest.importorskip("torch")
    from hrlsched.agent.policy import HRLScheduler

    pol = HRLScheduler(None)
    seen: list[bool] = []
    pol._decide = lambda view: seen.append(gc.isenabled()) or view  # type: ignore[method-assign,func-returns-value]
    pol.selector = pol.batch = None
    assert gc.isenabled()
    assert pol.decide("view") == "view" and seen == [False] and gc.isenabled()  # type: ignore[arg-type]
    gc.disable()
    try:
        pol.decide("view")  # type: ignore[arg-type]
        assert not gc.isenabled()
    finally:
        gc.enable()
