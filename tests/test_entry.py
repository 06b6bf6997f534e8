"""The console script's fast path for ``simulate`` (``hrlsched.entry``): the
same options as the typer command, the same output, without typer; anything
it is not sure of goes to the typer app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hrlsched.entry import parse_simulate

SMALL = ["--set", "workload.jobs=20", "--set", "workload.duration_h=2"]


def test_parse_simulate_reads_every_option_of_the_command() -> None:
    got = parse_simulate(["--scenario", "default", "--out=runs/x", "--policy", "fifo+pack", "--seed", "7",
                          "--set", "a=1", "--set=b=2", "--no-plots", "--force", "--checkpoint", "c.pt"])
    assert got == {"scenario": "default", "out": Path("runs/x"), "policy": "fifo+pack", "seed": 7,
                   "sets": ["a=1", "b=2"], "plots": False, "force": True, "checkpoint": Path("c.pt")}
    assert parse_simulate(["--out", "o", "--scenario", "s", "--plots", "--no-force"]) == {
        "out": Path("o"), "scenario": "s", "plots": True, "force": False}


def test_the_options_match_the_typer_command() -> None:
    import inspect

    from hrlsched import entry
    from hrlsched.cli import simulate
    from hrlsched.cli_simulate import run_simulate

    typer_params = set(inspect.signature(simulate).parameters) - {"set_"} | {"sets"}
    assert typer_params == set(inspect.signature(run_simulate).parameters)
    assert {k for k, _ in entry._VALUES.values()} | {k for k, _ in entry._FLAGS.values()} == typer_params


@pytest.mark.parametrize("args", [
    [],  # missing required options
    ["--scenario", "default"],
    ["--help"],
    ["--scenario", "default", "--out", "o", "--help"],
    ["--scenario", "default", "--out", "o", "--seed", "x"],
    ["--scenario", "default", "--out", "o", "--seed", "-1"],
    ["--scenario", "default", "--out", "o", "--seed", "²"],
    ["--scenario", "default", "--out", "o", "--unknown", "1"],
    ["--scenario", "default", "--out", "o", "extra"],
    ["--scenario", "default", "--scenario", "hetero", "--out", "o"],
    ["--scenario", "--out", "o"],
    ["--scenario", "default", "--out"],
    ["--scenario=", "--out", "o"],
    ["--no-plots=1", "--scenario", "default", "--out", "o"],
])
def test_anything_unusual_goes_to_typer(args: list[str]) -> None:
    assert parse_simulate(args) is None


def _script(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    # (the script ends by os._exit, skipping the interpreter's teardown: here an exit that can be caught)
    probe = ("import json, os, sys\nos._exit = sys.exit\nfrom hrlsched.entry import main\n"
             "sys.argv = ['hrlsched', *sys.argv[1:]]\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\nsys.exit(code)\n")
    p = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=cwd,
                       env={"HRLSCHED_CACHE_DIR": "off", "PATH": "/usr/bin:/bin"})
    return p, json.loads(p.stderr.strip().splitlines()[-1])


def test_fast_path_writes_what_the_typer_command_writes_without_typer(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hrlsched.cli import app

    args = ["simulate", "--scenario", "default", "--policy", "tiresias", "--seed", "3", "--no-plots", *SMALL]
    p, mods = _script([*args, "--out", str(tmp_path / "fast")], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "typer" not in mods and "click" not in mods and "hrlsched.sim.engine" in mods
    assert "avg_jct_s" in p.stdout and "default / tiresias / seed 3" in p.stdout
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "typer")])
    assert r.exit_code == 0, r.output
    for f in ("config.yaml", "jobs.csv", "rounds.csv", "summary.json"):
        assert (tmp_path / "fast" / f).read_bytes() == (tmp_path / "typer" / f).read_bytes(), f


def test_fast_path_reports_a_user_error_like_the_command(tmp_path: Path) -> None:
    p, mods = _script(["simulate", "--scenario", "nope", "--out", str(tmp_path / "x")], tmp_path)
    assert p.returncode == 2 and "error:" in p.stderr and "nope" in p.stderr
    assert "typer" not in mods
    p, mods = _script(["simulate", "--scenario", "default", "--seed", "x", "--out", str(tmp_path / "x")], tmp_path)
    assert p.returncode == 2 and "typer" in mods  # typer's own message for a bad value
