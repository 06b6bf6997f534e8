"""``hrlsched trace`` commands, and the data-needing built-in scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hrlsched.cli import app
from hrlsched.workload.loaders import load_trace

runner = CliRunner()

ITP = ("job_id,submission_time,duration,num_gpu\n"
       "a,0,3600,1\nb,100,7200,2\nc,300,3600,8\nd,1000,1800,1\ne,1300,3600,4\n")


def invoke(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, r.output


def test_stats_json(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(ITP)
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "itp", "--cluster", "2x4", "--json")
    assert code == 0, out
    st = json.loads(out)
    assert st["jobs"] == 5 and st["gpu_histogram"] == {"1": 2, "2": 1, "4": 1, "8": 1}
    assert st["duration_s"]["p50"] == 3600.0
    gaps = np.diff([0, 100, 300, 1000, 1300])
    assert st["interarrival_cv"] == pytest.approx(gaps.std() / gaps.mean(), abs=1e-3)
    gpu_s = 3600 + 2 * 7200 + 8 * 3600 + 1800 + 4 * 3600
    assert st["gpu_hours"] == pytest.approx(gpu_s / 3600, abs=0.1)
    assert st["offered_load"] == pytest.approx(gpu_s / (8 * 1300), abs=1e-3)
    assert st["jobs_larger_than_cluster"] == 0 and st["cluster_gpus"] == 8
    # A window: the arrivals in [100, 100 + 0.25 h), offered load over the window's length.
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "itp", "--cluster", "2x4", "--json",
                       "--window-start-s", "100", "--window-h", "0.25")
    st = json.loads(out)
    assert st["jobs"] == 2 and st["offered_load"] == pytest.approx((2 * 7200 + 8 * 3600) / (8 * 900), abs=1e-3)


def test_stats_table_and_errors(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(ITP)
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "itp", "--cluster", "default")
    assert code == 0 and "interarrival_cv" in out and "offered_load" in out
    (tmp_path / "bad.csv").write_text("job_id,submission_time,duration,num_gpu\na,0,x,1\n")
    code, out = invoke("trace", "stats", str(tmp_path / "bad.csv"), "--format", "itp")
    assert code == 2 and "bad.csv:2: field duration: expected seconds" in " ".join(out.split())
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "nope")
    assert code == 2 and "unknown trace format" in out
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "itp", "--cluster", "big")
    assert code == 2 and "--cluster 'big'" in out
    (tmp_path / "s.yaml").write_text("cluster:\n  server_groups:\n    - count: 0\n      nics: 2\n")
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "itp", "--cluster", str(tmp_path / "s.yaml"))
    out = " ".join(out.split())
    assert code == 2 and "s.yaml: invalid cluster" in out and "cluster.server_groups.0.count: expected a value > 0" in out
    assert "cluster.server_groups.0.nics: unknown setting" in out


def test_cluster_from_an_alibaba_node_list(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(ITP)
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,393216,8,G2\n")
    code, out = invoke("trace", "stats", str(tmp_path / "c.csv"), "--format", "itp", "--cluster", str(tmp_path / "nodes.csv"),
                       "--json")
    assert code == 0, out
    assert json.loads(out)["cluster_gpus"] == 10


def test_convert_round_trip(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(ITP)
    code, out = invoke("trace", "convert", str(tmp_path / "c.csv"), "--format", "itp", "--out", str(tmp_path / "g.csv"))
    assert code == 0, out
    assert load_trace(tmp_path / "g.csv", "generic") == load_trace(tmp_path / "c.csv", "itp")
    code, out = invoke("trace", "convert", str(tmp_path / "g.csv"), "--format", "generic", "--out", str(tmp_path / "h.csv"))
    assert code == 0 and (tmp_path / "h.csv").read_text() == (tmp_path / "g.csv").read_text()


@pytest.mark.parametrize("arrivals", ["poisson", "diurnal", "bursty"])
def test_generate_hits_its_load(tmp_path: Path, arrivals: str) -> None:
    out = tmp_path / "gen.csv"
    code, msg = invoke("trace", "generate", "--out", str(out), "--jobs", "2000", "--arrivals", arrivals,
                       "--cluster", "8x8", "--load", "0.8", "--seed", "3")
    assert code == 0, msg
    recs = load_trace(out, "generic")
    assert len(recs) == 2000
    code, st = invoke("trace", "stats", str(out), "--format", "generic", "--cluster", "8x8", "--json")
    assert json.loads(st)["offered_load"] == pytest.approx(0.8, rel=0.05)


def test_generate_replay_and_errors(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(ITP)
    code, msg = invoke("trace", "generate", "--out", str(tmp_path / "r.csv"), "--jobs", "50", "--arrivals", "replay",
                       "--replay", str(tmp_path / "c.csv"), "--duration-h", "2")
    assert code == 0, msg
    assert max(r.arrival_s for r in load_trace(tmp_path / "r.csv", "generic")) < 7200
    code, msg = invoke("trace", "generate", "--out", str(tmp_path / "x.csv"), "--load", "0.5")
    assert code == 2 and "cluster" in msg
    code, msg = invoke("trace", "generate", "--out", str(tmp_path / "x.csv"), "--sizes", "nope", "--duration-h", "1")
    assert code == 2 and "--sizes 'nope'" in msg


def test_fit_prints_a_profile(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(ITP)
    code, out = invoke("trace", "fit", str(tmp_path / "c.csv"), "--format", "itp", "--name", "tiny")
    assert code == 0, out
    assert "name='tiny'" in out and "gpu_counts=(1, 2, 4, 8)" in out and "gpu_probs=(0.4, 0.2, 0.2, 0.2)" in out


def test_scenarios_say_which_need_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HRLSCHED_DATA", str(tmp_path / "nowhere"))
    code, out = invoke("scenarios", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["default"]["needs_data"] == [] and rows["default"]["data_present"]
    for name in [f"pollux-w{k}" for k in range(1, 9)] + ["itp-c01", "itp-c05", "itp-c07"]:
        assert rows[name]["needs_data"] and not rows[name]["data_present"], name
    assert rows["itp-generated"]["needs_data"] == []
    code, out = invoke("scenarios")
    assert "MISSING" in out and "HRLSCHED_DATA" in out


@pytest.mark.parametrize("scenario", ["itp-c01", "pollux-w2"])
def test_simulate_without_data_says_where_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     scenario: str) -> None:
    monkeypatch.setenv("HRLSCHED_DATA", str(tmp_path / "nowhere"))
    code, out = invoke("simulate", "--scenario", scenario, "--out", str(tmp_path / "run"))
    flat = " ".join(out.split())
    assert code == 2 and f"scenario '{scenario}' needs the public data folder" in flat and "HRLSCHED_DATA" in flat
    assert not (tmp_path / "run").exists()


def test_itp_scenario_simulates(shared_data: Path, tmp_path: Path) -> None:
    code, out = invoke("simulate", "--scenario", "itp-c05", "--policy", "fifo", "--out", str(tmp_path / "run"),
                       "--no-plots")
    assert code == 0, out
    summ = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summ["jobs_total"] == 426 and summ["jobs_completed"] == 426


def test_stats_on_the_real_itp_window(shared_data: Path) -> None:
    code, out = invoke("trace", "stats", str(shared_data / "itp" / "cluster01.csv"), "--format", "itp",
                       "--window-start-s", "1932025", "--window-h", "168", "--cluster", "itp-c01", "--json")
    st = json.loads(out)
    assert st["jobs"] == 544 and st["offered_load"] == pytest.approx(0.9148, abs=1e-4)
