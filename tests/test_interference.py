import json
from pathlib import Path

import numpy as np
import pytest

from hrlsched.calibration.interference import (
    fit_sharing,
    fit_sharing_structural,
    gavel_figures,
    gavel_predict,
    load_params,
    parse_jobs,
    read_deepshare,
    sharing_predict,
)


def write_deepshare(d: Path, f: np.ndarray) -> None:
    names = [f"M{i},2,2" for i in range(len(f))]
    mat = 1.0 / (1.0 + np.outer(f, f))
    lines = ["," + ",".join(f'"{n}"' for n in names)]
    lines += [f'"{n}",' + ",".join(f"{x:.6f}" for x in row) for n, row in zip(names, mat)]
    (d / "deepshare").mkdir(parents=True, exist_ok=True)
    (d / "deepshare" / "shared_thp_ratio.csv").write_text("\n".join(lines) + "\n")


def write_gavel(d: Path, c: float) -> None:
    cons, uncons = {}, {}
    for k in (1, 2, 4, 8):
        t = 0.1 + 0.01 * k
        key = str(("Toy (batch size 8)", k))
        cons[key] = {"null": 1.0 / t}
        uncons[key] = {"null": float(gavel_predict(c, np.array([k]), np.array([t]))[0] / t)}
    (d / "gavel").mkdir(parents=True, exist_ok=True)
    (d / "gavel" / "simulation_throughputs.json").write_text(json.dumps({"v100": cons, "v100_unconsolidated": uncons}))


def test_sharing_fit_recovers_comm_fractions(tmp_path: Path) -> None:
    f = np.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2])
    write_deepshare(tmp_path, f)
    _, mat = read_deepshare(tmp_path / "deepshare" / "shared_thp_ratio.csv")
    fit, pred = fit_sharing(mat)
    np.testing.assert_allclose(fit, f, atol=1e-3)


def test_gavel_spread_fit_predicts_other_scales(tmp_path: Path) -> None:
    write_gavel(tmp_path, 0.05)
    figs = gavel_figures(tmp_path)
    assert figs["gavel_spread_median_abs_err_heldout_k"] < 1e-6
    assert figs["gavel_job_types"] == 1


def test_deepshare_bad_value_is_named(tmp_path: Path) -> None:
    write_deepshare(tmp_path, np.array([0.2, 0.4]))
    p = tmp_path / "deepshare" / "shared_thp_ratio.csv"
    p.write_text(p.read_text().replace("0.961538", "fast", 1))
    with pytest.raises(ValueError, match="shared_thp_ratio.csv:2: field"):
        read_deepshare(p)


def test_structural_sharing_fit_recovers_volumes_and_contention() -> None:
    names = [f"{m},{g},{n}" for m in ("A", "B", "C") for g, n in ((2, 2), (4, 2), (8, 4))]
    models, mi, gpus = parse_jobs(names)
    v_true, k_true = np.array([0.1, 0.5, 1.2]), 1.7
    mat = sharing_predict(v_true, k_true, mi, gpus)
    v, k, pred = fit_sharing_structural(mat, mi, gpus)
    np.testing.assert_allclose(v, v_true, rtol=1e-3)
    assert k == pytest.approx(k_true, rel=1e-3)
    assert models == ["A", "B", "C"]


def test_bad_job_label_is_named() -> None:
    with pytest.raises(ValueError, match="'A,two,2'"):
        parse_jobs(["A,two,2"])


def test_fitted_contention_is_packaged_and_checked(tmp_path: Path) -> None:
    assert load_params()["contention"] > 0
    bad = tmp_path / "p.yaml"
    bad.write_text("contention: -1\n")
    with pytest.raises(ValueError, match="p.yaml: field 'contention'"):
        load_params(bad)
