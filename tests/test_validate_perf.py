import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from hrlsched.cli import app
from tests.test_interference import write_deepshare, write_gavel


def test_validate_perf_reports_and_skips(tmp_path: Path) -> None:
    write_deepshare(tmp_path, np.array([0.2, 0.4, 0.6]))
    write_gavel(tmp_path, 0.02)
    r = CliRunner().invoke(app, ["validate-perf", "--data-dir", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["figures"]["deepshare_sharing_median_abs_err"] < 1e-3
    assert {"DL2 Optimus calibration", "Pollux held-out all-reduce"} <= set(out["skipped"])
    assert "DeepShare network sharing" not in out["skipped"]


def test_validate_perf_on_public_data(shared_data: Path) -> None:
    r = CliRunner().invoke(app, ["validate-perf", "--data-dir", str(shared_data), "--json"])
    assert r.exit_code == 0, r.output
    figs = json.loads(r.output)["figures"]
    assert figs["dl2_mape_pct.max"] <= 10.0
    assert figs["deepshare_sharing_median_abs_err"] < figs["deepshare_measured_median_slowdown"]
    # The burst-overlap rule of the analytic model fits better than fluid sharing.
    assert figs["deepshare_sharing_median_abs_err"] < figs["deepshare_fluid_rule_median_abs_err"]
    assert figs["heldout_step_mape_pct.bert.single_node"] <= 15.0
    for k in ("gavel_spread_median_abs_err_heldout_k", "heldout_step_mape_pct.yolov3.multi_node"):
        assert k in figs


def test_validate_perf_on_empty_folder_skips_everything_with_reasons(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["validate-perf", "--data-dir", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["figures"] == {}
    assert len(out["skipped"]) == 6
    assert all("absent" in why or "measured_figures" in why for why in out["skipped"].values())


def test_validate_perf_table(tmp_path: Path) -> None:
    write_deepshare(tmp_path, np.array([0.2, 0.4, 0.6]))
    r = CliRunner().invoke(app, ["validate-perf", "--data-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "deepshare_sharing_median_abs_err" in r.output
