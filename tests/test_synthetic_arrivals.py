"""workload.arrivals of the synthetic workload (the arrivals experiment's knob):
Poisson by default and unchanged, diurnal and bursty arrivals of the same jobs
over the same window, bad values named."""

import numpy as np
import pytest

from hrlsched.config import ConfigError, dump_run_config, resolve_run_config
from hrlsched.scenario import build_scenario

DAY = ["workload.jobs=600", "workload.duration_h=24"]


def _jobs(*sets: str, seed: int = 0):
    return build_scenario(resolve_run_config("default", None, seed, list(sets)).scenario, seed).jobs


def _sizes(jobs) -> list[tuple]:
    return sorted((j.model, j.requested_gpus, j.total_samples, j.arch, j.mode, j.arch_open, j.user) for j in jobs)


def test_poisson_is_the_default_and_unchanged() -> None:
    assert _jobs() == _jobs("workload.arrivals=poisson")
    assert "arrivals" not in dump_run_config(resolve_run_config("default", None, 0, []))["scenario"]["workload"]


def test_diurnal_and_bursty_arrive_the_same_jobs_differently() -> None:
    poisson = _jobs(*DAY)
    horizon = 24 * 3600.0
    for process in ("diurnal", "bursty"):
        jobs = _jobs(*DAY, f"workload.arrivals={process}")
        assert _sizes(jobs) == _sizes(poisson)  # the same jobs, so the same offered load over the same window
        t = np.array([j.arrival_s for j in jobs])
        assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] <= horizon
        assert not np.array_equal(t, [j.arrival_s for j in poisson])
    day = np.array([j.arrival_s for j in _jobs(*DAY, "workload.arrivals=diurnal")]) / 3600.0
    # 9x more arrivals at the 16:00 peak than at the 04:00 trough: the afternoon holds most of them
    assert np.mean((day >= 10) & (day < 22)) > 0.7 > np.mean((np.array([j.arrival_s for j in poisson]) / 3600.0 >= 10)
                                                             & (np.array([j.arrival_s for j in poisson]) / 3600.0 < 22))
    gaps = np.diff([j.arrival_s for j in _jobs(*DAY, "workload.arrivals=bursty")])
    assert gaps.std() / gaps.mean() > 2.5  # Poisson: about 1
    assert _jobs(*DAY, "workload.arrivals=diurnal", "workload.start_hour=12") != _jobs(*DAY, "workload.arrivals=diurnal")


@pytest.mark.parametrize("bad, field", [("workload.arrivals=weekly", "scenario.workload.arrivals:"),
                                        ("workload.diurnal_ratio=0.5", "scenario.workload.diurnal_ratio:"),
                                        ("workload.target_cv=1", "scenario.workload.target_cv:"),
                                        ("workload.start_hour=24", "scenario.workload.start_hour:")])
def test_bad_arrival_settings_are_named(bad: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        resolve_run_config("default", None, 0, [bad])
