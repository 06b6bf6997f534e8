import csv
from pathlib import Path

from typer.testing import CliRunner

from hrlsched.cli import app
from hrlsched.experiments.compare import interval


def test_compare_writes_table_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    r = CliRunner().invoke(app, ["compare", "--scenario", "default", "--policies", "fifo,srtf+balance", "--seeds", "2",
                                 "--workers", "2", "--out", str(out), "--set", "workload.jobs=20", "--set", "workload.duration_h=1"])
    assert r.exit_code == 0, r.output
    with open(out / "comparison.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [row["policy"] for row in rows] == ["fifo", "srtf+balance", "lower bound"]
    assert all(float(row["jobs_completed"]) == 20 for row in rows[:2])
    floor = float(rows[2]["avg_jct_s"])
    assert 0 < floor <= min(float(row["avg_jct_s"]) for row in rows[:2])
    assert rows[0]["avg_jct_s_ci95"] != ""
    for f in ("comparison.md", "jct_cdf.png", "utilisation.png", "runs/fifo/seed1/summary.json", "runs/srtf_balance/seed0/jobs.csv"):
        assert (out / f).stat().st_size > 0
    md = (out / "comparison.md").read_text()
    assert "| fifo |" in md and md.strip().splitlines()[-1].startswith("| lower bound |")


def test_compare_refuses_unknown_policy(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["compare", "--scenario", "default", "--policies", "fifo,nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "nope" in r.output


def test_interval() -> None:
    m, h = interval([1.0, 2.0, 3.0])
    assert m == 2.0 and 2.4 < h < 2.5  # t(0.975, 2) * 1 / sqrt(3) = 2.484
    assert interval([5.0])[1] != interval([5.0])[1]  # nan with one seed
