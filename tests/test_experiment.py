import csv
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrlsched.cli import app
from hrlsched.experiments import studies
from hrlsched.experiments.compare import CompareInterrupted
from hrlsched.experiments.experiment import (
    COLUMNS,
    Experiment,
    Factor,
    estimate_s,
    plan,
    run_experiment,
)

TINY = Experiment(
    "tiny", "a tiny load sweep",
    (Factor("load", "offered load", (0.5, 1.0, 2.0), (0.5, 1.0),
            lambda v: ("default", ["workload.jobs=12", f"workload.duration_h={1 / v:g}"]), reference=1.0),),
    policies=("fifo", "srtf"), seeds=(0, 1, 2), quick_seeds=(0, 1), bound=True, plots=("sweep", "main"),
    cdf_policies=("fifo", "srtf"),
)


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv") as fh:
        return list(csv.DictReader(fh))


def test_tiny_experiment_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "x"
    seen = []
    rows = run_experiment(TINY, out, quick=True, workers=2, progress=lambda *a: seen.append(a))
    table = _rows(out)
    assert list(table[0]) == COLUMNS
    # one row per policy x setting x seed, paired: both policies on the same seeds
    assert len(rows) == len(table) == 2 * 2 * 2
    assert {(r["policy"], r["value"], r["seed"]) for r in table} == {
        (p, v, s) for p in ("fifo", "srtf") for v in ("0.5", "1") for s in ("0", "1")}
    for r in table:
        assert r["jobs_completed"] == "12" and float(r["avg_jct_s"]) >= float(r["lower_bound_avg_jct_s"]) > 0
        assert float(r["p99_jct_s"]) >= float(r["p95_jct_s"]) > 0 and 0 < float(r["gpu_util_mean"]) <= 1
        assert r["max_ftf"] != "" and r["restarts_total"] != "" and float(r["decisions"]) > 0
    assert {r["information"] for r in table if r["policy"] == "srtf"} == {"truth"}  # srtf: an oracle
    assert all(r["oracle"] == "true" for r in table if r["policy"] == "srtf")
    for f in ("tiny-load.png", "tiny-jct.png", "tiny-cdf.png", "tiny-slowdown.png", "summary.md"):
        assert (out / f).stat().st_size > 0, f
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["seeds"] == [0, 1] and meta["quick"] and meta["policies"] == ["fifo", "srtf"]
    assert "| srtf (oracle) |" in (out / "summary.md").read_text()
    # progress: runs done (the lower bounds among them) of all, to the last
    assert seen[0][2] == 0 and seen[-1][2] == seen[-1][3] == 2 * 2 * 3


def test_resume_after_an_interruption_keeps_finished_runs(tmp_path: Path) -> None:
    out = tmp_path / "x"

    def stop_after_three(cost: float, total_cost: float, done: int, total: int) -> None:
        if done >= 3:
            raise KeyboardInterrupt

    with pytest.raises(CompareInterrupted) as e:
        run_experiment(TINY, out, quick=True, workers=1, progress=stop_after_three)
    assert e.value.done == 3 and not (out / "results.csv").exists()
    kept = sorted(p for p in (out / "runs").rglob("seed*.json"))
    assert len(kept) == 3
    stamps = {p: p.stat().st_mtime_ns for p in kept}
    # what kill -9 may leave: a temporary file half written, never renamed
    (kept[0].parent / ".seed9.json.abc.tmp").write_text("{")
    starts = []
    run_experiment(TINY, out, quick=True, workers=1, progress=lambda *a: starts.append(a[2]))
    assert starts[0] == 3  # the three finished runs kept, not rerun
    assert all(p.stat().st_mtime_ns == stamps[p] for p in kept)
    assert len(_rows(out)) == 8
    # a record of another config is run again: a changed scenario never reuses old runs
    run = next(p for p in kept if p.parent.name != "lower-bound")
    rec = json.loads(run.read_text())
    rec["key"]["config"]["scenario"]["sim"]["round_s"] = 30
    run.write_text(json.dumps(rec))
    starts.clear()
    run_experiment(TINY, out, quick=True, workers=1, progress=lambda *a: starts.append(a[2]))
    assert starts[0] == 2 * 2 * 3 - 1


def test_ray_backend_on_a_local_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'hrlsched[ray]')")
    small = Experiment("small", "two runs", (Factor("load", "offered load", (1.0,), (1.0,), TINY.factors[0].setting),),
                       policies=("fifo", "srtf"), quick_seeds=(3,))
    local = run_experiment(small, tmp_path / "local", quick=True, workers=1)
    on_ray = run_experiment(small, tmp_path / "ray", quick=True, workers=2, backend="ray")
    fig = ["policy", "value", "seed", "avg_jct_s", "p99_jct_s", "makespan_s", "restarts_total"]
    assert [[r[k] for k in fig] for r in on_ray] == [[r[k] for k in fig] for r in local]
    assert len(on_ray) == 2 and (tmp_path / "ray" / "small-load.png").is_file()


def test_cli_help_bad_name_and_a_tiny_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = CliRunner().invoke(app, ["experiment", "--help"])
    assert r.exit_code == 0 and "--quick" in r.output and "--backend" in r.output and "prediction-error" in r.output
    r = CliRunner().invoke(app, ["experiment", "nope"])
    assert r.exit_code == 2 and "expected one of main" in r.output
    r = CliRunner().invoke(app, ["experiment", "load", "--backend", "slurm", "--plan"])
    assert r.exit_code == 2 and "--backend" in r.output
    monkeypatch.setitem(studies.EXPERIMENTS, "tiny", TINY)
    out = tmp_path / "cli"
    r = CliRunner().invoke(app, ["experiment", "tiny", "--quick", "--out", str(out), "--workers", "1"])
    assert r.exit_code == 0, r.output
    assert "= 12 runs, 0 kept" in r.output and "estimated" in r.output  # the plan and its time, first
    assert "runs 12/12" in r.output and "done" in r.output  # the progress lines (not a terminal)
    assert "| fifo |" in r.output
    assert json.loads((out / "experiment.json").read_text())["command"].startswith(
        f"hrlsched experiment tiny --quick --out {out}")
    r = CliRunner().invoke(app, ["experiment", "tiny", "--quick", "--out", str(out), "--plan"])
    assert r.exit_code == 0 and "12 kept" in r.output
    # the docs page: the plots copied, the tables below the command; the reading above it kept
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tiny.md").write_text("# Tiny\n\nThe reading.\n\n<!-- generated by: old -->\nold tables\n")
    r = CliRunner().invoke(app, ["experiment", "tiny", "--quick", "--out", str(out), "--docs", str(docs)])
    assert r.exit_code == 0, r.output
    page = (docs / "tiny.md").read_text()
    assert page.startswith("# Tiny\n\nThe reading.\n\n<!-- generated by: hrlsched experiment tiny --quick")
    assert "old tables" not in page and "| srtf (oracle) |" in page and "12 runs in" in page
    assert "![tiny-load.png](tiny-load.png)" in page and (docs / "tiny-load.png").stat().st_size > 0
    assert len(json.loads((out / "experiment.json").read_text())["invocations"]) == 2


def test_every_study_plans_and_its_quick_size_fits_ten_minutes(tmp_path: Path) -> None:
    for name, exp in studies.EXPERIMENTS.items():
        quick = plan(exp, tmp_path / name, quick=True)
        assert quick and estimate_s(quick, 2) < 600, name
        full = plan(exp, tmp_path / name)
        assert estimate_s(full, 2) > estimate_s(quick, 2) and {t.seed for t in full} >= {t.seed for t in quick}, name
    assert os.listdir(tmp_path) == []  # planning writes nothing


def test_every_policy_means_every_scheduler_but_the_oracle_planners() -> None:
    # the lookahead takes minutes per episode: a study of every policy leaves it to docs/headroom.md
    from hrlsched.policies.registry import PLANNERS, SCHEDULERS

    every = studies.EXPERIMENTS["main"].policy_list(quick=True)
    assert PLANNERS and not PLANNERS & set(every)
    assert set(SCHEDULERS) - PLANNERS <= set(every) and {"hrl", "dl2", "harmony", "optimus-tuned"} <= set(every)
