"""Bad input a new user hits: each case names the path or field and what was
expected, exits 2 (or warns), and loses nothing. One row per case (issue 14)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrlsched.cli import app

runner = CliRunner()
SMALL = ["--set", "workload.jobs=12", "--set", "workload.duration_h=1"]


def sim(out: Path | str, *extra: str, scenario: str = "default") -> tuple[int, str]:
    r = runner.invoke(app, ["simulate", "--scenario", scenario, "--policy", "fifo", "--out", str(out),
                            "--no-plots", *SMALL, *extra])
    return r.exit_code, r.output


def _existing_file(tmp: Path) -> list[str]:
    f = tmp / "a-file"
    f.write_text("x")
    return ["simulate", "--scenario", "default", "--out", str(f), *SMALL]


def _scenario_dir(tmp: Path) -> list[str]:
    return ["simulate", "--scenario", str(tmp), "--out", str(tmp / "o"), *SMALL]


def _scenario_binary(tmp: Path) -> list[str]:
    f = tmp / "s.yaml"
    f.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    return ["simulate", "--scenario", str(f), "--out", str(tmp / "o"), *SMALL]


def _negative_seed(tmp: Path) -> list[str]:
    return ["simulate", "--scenario", "default", "--out", str(tmp / "o"), "--seed", "-1", *SMALL]


def _foreign_out(tmp: Path) -> list[str]:
    (tmp / "o").mkdir()
    (tmp / "o" / "notes.txt").write_text("mine")
    return ["simulate", "--scenario", "default", "--out", str(tmp / "o"), *SMALL]


def _missing_data_dir(tmp: Path) -> list[str]:
    return ["validate-perf", "--data-dir", str(tmp / "nonexistent")]


def _duplicate_policies(tmp: Path) -> list[str]:
    return ["compare", "--scenario", "default", "--policies", "fifo,fifo", "--out", str(tmp / "c"), *SMALL]


def _empty_policies(tmp: Path) -> list[str]:
    return ["compare", "--scenario", "default", "--policies", "", "--out", str(tmp / "c"), *SMALL]


def _non_utf8_trace(tmp: Path) -> list[str]:
    f = tmp / "t.csv"
    f.write_bytes(b"job_id,submission_time,duration,num_gpu\n1,0,700,1\n2,10,800,2\xff\n")
    return ["trace", "stats", str(f), "--format", "itp"]


CASES: list[tuple[str, Callable[[Path], list[str]], list[str]]] = [
    ("out is an existing file", _existing_file, ["a-file", "is an existing file", "expected a directory"]),
    ("scenario is a directory", _scenario_dir, ["is a directory", "expected a scenario YAML"]),
    ("scenario is a binary file", _scenario_binary, ["s.yaml", "not a text (UTF-8) file"]),
    ("negative seed", _negative_seed, ["a seed is an integer >= 0"]),
    ("out holds someone else's files", _foreign_out, ["not empty", "--force"]),
    ("validate-perf data dir missing", _missing_data_dir, ["nonexistent", "no such directory"]),
    ("duplicate policies", _duplicate_policies, ["fifo named more than once"]),
    ("empty policies", _empty_policies, ["expected at least one policy"]),
    ("trace not UTF-8", _non_utf8_trace, ["t.csv:3", "not UTF-8"]),
]


@pytest.mark.parametrize("name,build,says", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_clearly(tmp_path: Path, name: str, build: Callable[[Path], list[str]],
                                      says: list[str]) -> None:
    r = runner.invoke(app, build(tmp_path))
    text = " ".join(r.output.split())  # rich wraps long lines
    assert r.exit_code == 2, (name, r.exit_code, r.output)
    assert "Traceback" not in r.output
    for s in says:
        assert s in text, (name, s, r.output)


def test_out_of_another_config_is_refused_and_force_replaces_it(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert sim(out, "--seed", "1")[0] == 0
    code, text = sim(out, "--seed", "2")
    assert code == 2 and "not empty" in " ".join(text.split())
    assert json.loads((out / "summary.json").read_text())  # the earlier run is intact
    assert sim(out, "--seed", "1")[0] == 0  # the same config may be re-run in place
    (out / "timeline.png").write_bytes(b"stale")
    assert sim(out, "--seed", "2", "--force")[0] == 0
    assert not (out / "timeline.png").exists(), "--force clears the earlier run's plots"
    assert "seed: 2" in (out / "config.yaml").read_text()


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root can write into a read-only directory")
def test_unwritable_out_fails_before_simulating(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, text = sim(ro / "run")
        assert code == 2 and "cannot write" in text
    finally:
        ro.chmod(0o700)


def test_unwritable_out_is_found_before_the_simulation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever runs the tests (root too): a directory that refuses files fails
    before any simulation starts."""
    import hrlsched.outdir as outdir
    import hrlsched.run as run

    def no_files(*a: object, **k: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(outdir.tempfile, "mkstemp", no_files)
    monkeypatch.setattr(run, "simulate", lambda *a, **k: pytest.fail("simulated before checking --out"))
    code, text = sim(tmp_path / "o")
    text = " ".join(text.split())  # the console wraps long paths at its width
    assert code == 2 and "cannot write there" in text and "Permission denied" in text


def test_output_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        assert sim(tmp_path / "o")[0] == 0
    finally:
        os.umask(old)
    for f in ("config.yaml", "jobs.csv", "rounds.csv", "summary.json"):
        assert stat.S_IMODE((tmp_path / "o" / f).stat().st_mode) == 0o644, f


def test_summary_reads_as_hours_and_minutes_and_no_plots_says_so(tmp_path: Path) -> None:
    code, text = sim(tmp_path / "o")
    assert code == 0
    assert "e+0" not in text and " min" in text
    assert "plots" not in text.splitlines()[-1] and ".png" not in text
    summ = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert isinstance(summ["avg_jct_s"], float)  # seconds stay in the file


def test_gpu_counts_above_the_cluster_warn_once_with_the_figure() -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario

    cfg = resolve_run_config("default", overrides=["workload.jobs=40", "workload.gpu_counts=[1,128]",
                                                   "workload.gpu_probs=[0.5,0.5]"])
    with pytest.warns(UserWarning, match=r"more than the cluster's 64 GPUs \(up to 128\); capped at 64") as rec:
        jobs = build_scenario(cfg.scenario, 0).jobs
    assert len([w for w in rec if "gpu_counts" in str(w.message)]) == 1
    assert max(j.requested_gpus for j in jobs) == 64


def test_plots_say_what_they_show(tmp_path: Path) -> None:
    """Titles name scenario and policy; axes carry units."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hrlsched.sim import plots

    seen: list[tuple[str, list[str]]] = []
    real_save = plots._save

    def spy(fig, path: Path) -> None:  # noqa: ANN001
        labels = [a.get_xlabel() for a in fig.axes] + [a.get_ylabel() for a in fig.axes]
        title = (fig._suptitle.get_text() if fig._suptitle else "") + " ".join(a.get_title() for a in fig.axes)
        seen.append((title, labels))
        real_save(fig, path)

    plots._save = spy
    try:
        r = runner.invoke(app, ["simulate", "--scenario", "default", "--policy", "fifo", "--out",
                                str(tmp_path / "o"), *SMALL])
    finally:
        plots._save = real_save
        plt.close("all")
    assert r.exit_code == 0, r.output
    assert len(seen) == 2
    for title, labels in seen:
        assert "default" in title and "fifo" in title
        assert any("(h)" in x for x in labels)
        assert all(("(" in x) for x in labels if x)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_compare_keeps_finished_runs_and_resumes(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    out = tmp_path / "cmp"
    exe = Path(sys.executable).with_name("hrlsched")
    cmd = [str(exe), "compare", "--scenario", "default", "--policies", "fifo,srtf,drf", "--seeds", "4",
           "--workers", "2", "--out", str(out), "--set", "workload.jobs=40", "--set", "workload.duration_h=2"]
    # an xdist worker may ignore SIGINT, and children inherit that: give the command the default handler
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("runs/*/*/summary.json"))) < 2:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)  # as a terminal does: the whole process group
    t0 = time.time()
    _, err = p.communicate(timeout=30)
    stopped_in = time.time() - t0
    assert p.returncode == 130, err
    assert stopped_in < 10
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("interrupted:")]
    assert len(lines) == 1 and f"kept in {out}" in lines[0], err
    done = int(lines[0].split()[1])
    kept = sorted(out.glob("runs/*/*/summary.json"))
    assert len(kept) == done and done < 12
    stamps = {f: f.stat().st_mtime_ns for f in kept}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(list(out.glob("runs/*/*/summary.json"))) == 12
    assert all(f.stat().st_mtime_ns == t for f, t in stamps.items()), "finished runs are not run again"
