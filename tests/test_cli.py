import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from hrlsched.cli import app
from hrlsched.sim.metrics import JOB_COLUMNS, ROUND_COLUMNS

runner = CliRunner()
SMALL = ["--set", "workload.jobs=30", "--set", "workload.duration_h=2"]
SUMMARY_KEYS = {
    "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "jobs_total", "jobs_completed",
    "gpu_util_mean", "avg_queue_s", "max_ftf", "policy", "scenario",
}


def simulate(out: Path, *extra: str) -> None:
    r = runner.invoke(app, ["simulate", "--scenario", "default", "--policy", "fifo", "--out", str(out), *SMALL, *extra])
    assert r.exit_code == 0, r.output


def test_simulate_writes_every_output_of_design_md(tmp_path: Path) -> None:
    out = tmp_path / "run"
    simulate(out, "--seed", "1")
    for f in ("config.yaml", "jobs.csv", "rounds.csv", "summary.json", "jct_cdf.png", "timeline.png"):
        assert (out / f).stat().st_size > 0, f
    with open(out / "jobs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == JOB_COLUMNS and len(rows) == 30
    assert all(r["finish_s"] != "" for r in rows)
    with open(out / "rounds.csv") as fh:
        assert next(csv.reader(fh)) == ROUND_COLUMNS
    summ = json.loads((out / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summ)
    assert summ["jobs_completed"] == 30 and summ["policy"] == "fifo" and summ["scenario"] == "default"
    assert not list(out.glob(".*tmp")), "no temporary files left behind"


def test_same_seed_gives_byte_identical_outputs(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    simulate(a, "--seed", "7")
    simulate(b, "--seed", "7")
    simulate(c, "--seed", "8", "--no-plots")
    for f in ("config.yaml", "jobs.csv", "rounds.csv", "summary.json", "jct_cdf.png", "timeline.png"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert (a / "jobs.csv").read_bytes() != (c / "jobs.csv").read_bytes()


def test_saved_config_reproduces_the_run(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    simulate(a, "--seed", "3", "--set", "sim.round_s=30")
    r = runner.invoke(app, ["simulate", "--scenario", str(a / "config.yaml"), "--out", str(b)])
    assert r.exit_code == 0, r.output
    assert (a / "jobs.csv").read_bytes() == (b / "jobs.csv").read_bytes()
    assert "round_s: 30" in (b / "config.yaml").read_text()


def test_bad_values_are_named(tmp_path: Path) -> None:
    r = runner.invoke(app, ["simulate", "--scenario", "default", "--out", str(tmp_path), "--set", "sim.round_s=-5"])
    assert r.exit_code == 2 and "sim.round_s" in r.output
    r = runner.invoke(app, ["simulate", "--scenario", "default", "--out", str(tmp_path), "--set", "cluster.server_groups.0.nic_gbps=fast"])
    assert r.exit_code == 2 and "nic_gbps" in r.output
    r = runner.invoke(app, ["simulate", "--scenario", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "built-in scenario" in r.output
    r = runner.invoke(app, ["simulate", "--scenario", "default", "--policy", "magic", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "unknown policy 'magic'" in r.output
    r = runner.invoke(app, ["simulate", "--scenario", "default", "--out", str(tmp_path), "--set", "oops"])
    assert r.exit_code == 2 and "KEY=VALUE" in r.output


def test_scenarios_lists_default() -> None:
    r = runner.invoke(app, ["scenarios", "--json"])
    assert r.exit_code == 0
    assert "default" in {s["name"] for s in json.loads(r.output)}
