"""Every built-in policy gives the same per-job results as the recorded ones
(``tests/data/regression/record.py`` re-records them), within a float
tolerance: the engine's refactorings must not move a figure."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import SHARED_DATA
from tests.data.regression import record

FAST = ["fifo", "srtf", "tiresias", "drf+topology"]


def _check(scenario: str, policy: str) -> None:
    want = record.load(scenario)[policy]
    got = record.compute(scenario, policy)
    np.testing.assert_array_equal(got["job_id"], want["job_id"])
    np.testing.assert_array_equal(got["restarts"], want["restarts"], err_msg=f"{policy}: restarts")
    for k in ("start_s", "finish_s", "gpu_seconds", "mean_workers"):
        # Recorded to 1e-3; a tolerance well above that rounding, far below any real change.
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=0.01, equal_nan=True,
                                   err_msg=f"{scenario} {policy}: {k}")


def _params(fast: bool) -> list:
    out = []
    for sc in record.SCENARIOS:
        for pol in record.policies():
            if (pol in FAST) == fast:
                mark = [pytest.mark.slow] if not fast else []
                out.append(pytest.param(sc, pol, marks=mark, id=f"{sc}-{pol}"))
    return out


def _skip_without_data(scenario: str) -> None:
    if scenario.startswith("pollux") and not SHARED_DATA.exists():
        pytest.skip(f"public data folder {SHARED_DATA} is absent (see ../shared/data/SOURCES.md)")


@pytest.mark.parametrize(("scenario", "policy"), _params(fast=True))
def test_recorded_results_fast(scenario: str, policy: str) -> None:
    _skip_without_data(scenario)
    _check(scenario, policy)


@pytest.mark.parametrize(("scenario", "policy"), _params(fast=False))
def test_recorded_results_all(scenario: str, policy: str) -> None:
    _skip_without_data(scenario)
    _check(scenario, policy)


def test_fixtures_cover_every_builtin_policy() -> None:
    for sc in record.SCENARIOS:
        assert set(record.load(sc)) == set(record.policies())
