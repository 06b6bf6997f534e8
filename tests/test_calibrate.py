import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hrlsched.calibration.dl2_fit import calibrate_dl2, dl2_figures, predict_speed, read_dl2
from hrlsched.cli import app

THETA = np.array([0.004, 0.3, 0.4, 0.008, 0.002])


def write_dl2(path: Path, theta: np.ndarray, noise: float = 0.0, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    lines = []
    for p in range(1, 7):
        for w in range(1, 9):
            speed = float(predict_speed(theta, np.array([32.0]), np.array([w]), np.array([p]))[0])
            speed *= 1 + noise * rng.standard_normal()
            per = [round(speed / w, 5)] * w
            lines.append(repr(("toy", "dist_sync", 32, p, w, per, [1.0] * p, [0.5] * w)))
    lines.append(repr(("toy", "dist_sync", 32, 1, 2, [0.0, 3.0], [1.0], [0.5, 0.5])))  # a failed run
    path.write_text("\n".join(lines) + "\n")


def test_fit_recovers_known_parameters(tmp_path: Path) -> None:
    f = tmp_path / "speed.txt"
    write_dl2(f, THETA)
    res = calibrate_dl2(f)
    assert res.dropped == 1
    fit = res.fits["toy"]
    np.testing.assert_allclose(fit.theta, THETA, rtol=1e-3, atol=1e-6)
    assert fit.mape < 1e-3


def test_fit_with_noise_stays_close(tmp_path: Path) -> None:
    f = tmp_path / "speed.txt"
    write_dl2(f, THETA, noise=0.03)
    fit = calibrate_dl2(f).fits["toy"]
    assert 1.0 < fit.mape < 5.0
    assert abs(fit.theta[0] - THETA[0]) / THETA[0] < 0.25


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("('toy', 'dist_sync', 32, 1, 1, [1.0], [1.0]", "bad.txt:2: expected a Python tuple literal"),
        ("('toy', 'dist_sync', 32, 1, 1, [1.0], [1.0])", "bad.txt:2: expected a tuple of 8 fields"),
        ("('toy', 'dist_sync', '32', 1, 1, [1.0], [1.0], [1.0])", "bad.txt:2: field global_batch"),
        ("('toy', 'dist_sync', 32, 1, 2, [1.0], [1.0], [1.0, 1.0])", "bad.txt:2: field worker speeds: expected 2"),
        ("('toy', 'sync', 32, 1, 1, [1.0], [1.0], [1.0])", "bad.txt:2: field mode"),
    ],
)
def test_malformed_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "bad.txt"
    f.write_text("('toy', 'dist_sync', 32, 1, 1, [1.0], [1.0], [1.0])\n" + line + "\n")
    with pytest.raises(ValueError, match=re.escape(message)):
        read_dl2(f)


def test_cli_writes_params_and_json(tmp_path: Path) -> None:
    f = tmp_path / "speed.txt"
    write_dl2(f, THETA)
    out = tmp_path / "params.yaml"
    r = CliRunner().invoke(app, ["calibrate", "--format", "dl2", str(f), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["models"]["toy"]["mape_pct"] < 0.01 and doc["failed_runs_dropped"] == 1
    assert "theta" in out.read_text()
    r = CliRunner().invoke(app, ["calibrate", "--format", "csv", str(f)])
    assert r.exit_code == 2


def test_real_dl2_measurements_fit_within_ten_percent(shared_data: Path) -> None:
    figs = dl2_figures(shared_data)
    assert len([k for k in figs if k != "dl2_mape_pct.max"]) == 8
    assert figs["dl2_mape_pct.max"] <= 10.0
