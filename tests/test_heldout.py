from pathlib import Path

import numpy as np
import pytest

from hrlsched.calibration import colocation
from hrlsched.calibration.heldout import (
    TEST,
    TRAIN,
    _params,
    _predict,
    fit_allreduce,
    heldout_figures,
    heldout_model,
    placement_rows,
)
from hrlsched.cluster import Placement
from hrlsched.core import Job

TRUE = {"pcie_gbps": 60.0, "straggler": 0.03, "ring_spread_eff": 0.6, "host_staging": 0.12, "compute_sensitivity": 0.1}
PIDS = ["1", "2", "3", "4", "11", "12", "22", "13", "44", "111", "112", "222", "444", "1111", "1234", "4444"]
LINES = {"bert": (0.06, 0.2), "cifar10": (0.0007, 0.02), "deepspeech2": (0.03, 0.09),
         "imagenet": (0.004, 0.08), "ncf": (1e-6, 0.007), "yolov3": (0.025, 0.2)}


def test_closed_form_is_the_analytic_model() -> None:
    model = heldout_model(TRUE, {n: LINES[n] for n in TEST})
    for name in TEST:
        a, c = LINES[name]
        rows = placement_rows(name, np.array(PIDS), np.full(len(PIDS), 8), a, c)
        expect = _predict(_params(TRUE), rows, TRUE["compute_sensitivity"])
        for pid, t in zip(PIDS, expect):
            gpus = tuple(4 * node + g for node, k in enumerate(int(x) for x in pid) for g in range(k))
            job = Job(0, 0.0, name, 1e6, 8 * len(gpus), len(gpus), arch="allreduce")
            speed = model.speeds([job], [Placement(gpus)])[0]
            assert job.batch_size / speed == pytest.approx(t, rel=1e-9), (name, pid)


def write_pollux_traces(root: Path, truth: dict[str, float], noise: float = 0.0) -> None:
    rng = np.random.default_rng(0)
    for name, (a, c) in LINES.items():
        b = np.tile([4, 8, 16], len(PIDS))
        pids = np.repeat(PIDS, 3)
        rows = placement_rows(name, pids, b, a, c)
        step = _predict(_params(truth), rows, truth["compute_sensitivity"]) * np.exp(noise * rng.standard_normal(b.size))
        comp = (a * b + c) * (1 + truth["compute_sensitivity"] * (rows["g"] - 1) / 4)
        d = root / "pollux" / "traces" / name
        d.mkdir(parents=True)
        lines = ["placement,local_bsz,step_time,sync_time"]
        lines += [f"{p},{bb},{float(s)!r},{max(float(s - cc), 0.0)!r}" for p, bb, s, cc in zip(pids, b, step, comp)]
        (d / "placements.csv").write_text("\n".join(lines) + "\n")


def test_fit_recovers_known_parameters(tmp_path: Path) -> None:
    write_pollux_traces(tmp_path, TRUE)
    fit = fit_allreduce(tmp_path)
    for k, v in TRUE.items():
        assert fit[k] == pytest.approx(v, rel=1e-3), k
    figs = heldout_figures(tmp_path)
    assert all(figs[f"heldout_step_mape_pct.{n}.multi_node"] < 1e-3 for n in TEST)


def test_sensitivity_fit_per_application(tmp_path: Path) -> None:
    write_pollux_traces(tmp_path, TRUE)
    s = colocation.fitted_sensitivities(tmp_path)
    assert s == {a: pytest.approx(TRUE["compute_sensitivity"], abs=1e-3) for a in colocation.APPS}
    figs = colocation.colocation_figures(tmp_path)
    assert figs["compute_interference_loo_mape_pct.all"] < 1e-3 < figs["compute_interference_none_mape_pct.all"]


def test_on_public_data_meets_the_target(shared_data: Path) -> None:
    figs = heldout_figures(shared_data)
    for n in TEST:
        for part in ("single_node", "multi_node"):
            assert figs[f"heldout_step_mape_pct.{n}.{part}"] <= 15.0, (n, part)
    assert set(TRAIN).isdisjoint(TEST)


def test_catalogue_carries_the_fitted_sensitivities(shared_data: Path) -> None:
    from hrlsched.core.catalogue import CATALOGUE, MEDIAN_SENSITIVITY

    fitted = colocation.fitted_sensitivities(shared_data)
    assert {a: CATALOGUE[a].compute_sensitivity for a in colocation.APPS} == fitted
    assert MEDIAN_SENSITIVITY == pytest.approx(float(np.median(list(fitted.values()))), abs=1e-3)
