"""``hrlsched train-es``: evolution strategies on the agent's residual layer (agent/es.py)."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from hrlsched.agent.es import ESConfig, _episode, train  # noqa: E402

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
    jct, steps = _episode(None, "default", SETS, 101, None)
    assert jct == rules and steps > 0
    assert _episode(None, "default", SETS, 101, np.zeros(64, dtype=np.float32)) == (jct, steps)


def test_resume_continues_as_one_run_and_settings_must_match(tmp_path: Path) -> None:
    whole = train(cfg(), tmp_path / "a")
    train(cfg(iterations=1), tmp_path / "b")
    resumed = train(cfg(), tmp_path / "b", resume=True)
    np.testing.assert_array_equal(resumed.theta, whole.theta)
    assert [r["train_gain_pct"] for r in resumed.curve] == [r["train_gain_pct"] for r in whole.curve]
    assert (tmp_path / "b" / "curve.csv").read_text().count("\n") == 3 and (tmp_path / "b" / "curve.png").is_file()
    with pytest.raises(ValueError, match="other settings"):
        train(cfg(sigma=0.2), tmp_path / "b", resume=True)
    with pytest.raises(ValueError, match="already"):
        train(cfg(), tmp_path / "b")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="held_back"):
        cfg(held_back=(5,))
    with pytest.raises(ValueError, match="pairs"):
        cfg(pairs=0)
