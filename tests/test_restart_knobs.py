"""sim.restart_scale and sim.max_restarts (the overhead experiment's knobs):
the default changes nothing, the knob does what it says, a bad value is named."""

import numpy as np
import pytest

from hrlsched.config import ConfigError, dump_run_config, resolve_run_config
from hrlsched.experiments.bound import lower_bound
from hrlsched.run import simulate
from hrlsched.scenario import build_scenario
from hrlsched.sim.engine import EngineConfig

SMALL = ["workload.jobs=30", "workload.duration_h=1"]


def _run(*sets: str, policy: str = "optimus+pack"):
    return simulate(resolve_run_config("default", policy, 0, [*SMALL, *sets]))


def _delay(res) -> float:
    return float(np.sum(res.hold_s - res.productive_s))  # job-seconds paying launch and restart delays


def test_restart_scale() -> None:
    base, one = _run(), _run("sim.restart_scale=1.0")
    np.testing.assert_array_equal(base.finish_s, one.finish_s)
    assert "restart_scale" not in dump_run_config(resolve_run_config("default", None, 0, ["sim.restart_scale=1"]))["scenario"]["sim"]
    assert dump_run_config(resolve_run_config("default", None, 0, ["sim.restart_scale=2"]))["scenario"]["sim"]["restart_scale"] == 2
    assert _delay(_run("sim.restart_scale=0")) == 0 < _delay(base) < _delay(_run("sim.restart_scale=4"))
    free = build_scenario(resolve_run_config("default", None, 0, [*SMALL, "sim.restart_scale=0"]).scenario, 0)
    paid = build_scenario(resolve_run_config("default", None, 0, SMALL).scenario, 0)
    assert lower_bound(free)["avg_launch_s"] == 0 < lower_bound(paid)["avg_launch_s"]
    with pytest.raises(ConfigError, match="sim.restart_scale"):
        resolve_run_config("default", None, 0, ["sim.restart_scale=-1"])
    with pytest.raises(ValueError, match="restart_scale"):
        EngineConfig(restart_scale=-0.5)


def test_max_restarts() -> None:
    base = _run()
    assert base.restarts.max() > 1  # Optimus resizes its jobs often
    np.testing.assert_array_equal(base.finish_s, _run("sim.max_restarts=null").finish_s)
    assert "max_restarts" not in dump_run_config(resolve_run_config("default", None, 0, []))["scenario"]["sim"]
    for cap in (0, 1, 3):
        res = _run(f"sim.max_restarts={cap}")
        assert res.restarts.max() <= cap and not np.isnan(res.finish_s).any()  # every job still finishes
    # a scheduler that preempts (srtf) and one that chooses architectures and modes (optimus-tuned)
    for policy in ("srtf", "optimus-tuned"):
        res = _run("sim.max_restarts=0", policy=policy)
        assert res.restarts.max() == 0 and not np.isnan(res.finish_s).any()
    for bad in ("-1", "1.5", "many"):
        with pytest.raises(ConfigError, match="sim.max_restarts"):
            resolve_run_config("default", None, 0, [f"sim.max_restarts={bad}"])
    with pytest.raises(ValueError, match="max_restarts"):
        EngineConfig(max_restarts=-2)
