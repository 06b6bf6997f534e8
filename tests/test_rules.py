"""``optimus-tuned``: the agent's rules as a heuristic of their own."""

from pathlib import Path

import numpy as np
import pytest

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
