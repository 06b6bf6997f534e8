"""Users time the whole command: a command imports only what it uses (the
figures are printed by benchmarks/import_time.py; here only which modules)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("scipy", "matplotlib", "pandas", "torch", "gymnasium")

PROBE = """
import json, sys
from hrlsched.cli import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | {m for m in sys.modules if m.startswith('hrlsched')})))
"""


def _modules(args: list[str], tmp_path: Path, **env: str) -> set[str]:
    env = {"HRLSCHED_CACHE_DIR": "off", "PATH": "/usr/bin:/bin", **env}
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True,
                         cwd=tmp_path, env=env).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_simulate_without_plots_imports_nothing_heavy(tmp_path: Path) -> None:
    mods = _modules(["simulate", "--scenario", "default", "--no-plots", "--out", str(tmp_path / "run")], tmp_path)
    assert (tmp_path / "run" / "summary.json").exists()
    assert "hrlsched.sim.engine" in mods
    assert not mods & set(HEAVY), mods & set(HEAVY)
    assert "hrlsched.sim.plots" not in mods
    assert not [m for m in mods if m.startswith(("hrlsched.agent", "hrlsched.rivals"))]


def test_console_script_simulate_imports_no_typer_pydantic_or_rich(tmp_path: Path) -> None:
    """The console script's own path: settings of our own (``hrlsched.schema``), a plain summary table
    (rich only for a progress bar on a terminal; none here)."""
    probe = PROBE.replace("from hrlsched.cli import app", "import os\nos._exit = sys.exit  # (the script's last call)\n"
                          "from hrlsched.entry import main").replace("app(sys.argv[1:])", "main()")
    env = {"HRLSCHED_CACHE_DIR": "off", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", probe, "simulate", "--scenario", "default", "--no-plots", "--out",
                          str(tmp_path / "run")], capture_output=True, text=True, check=True, cwd=tmp_path, env=env)
    mods = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "hrlsched.sim.engine" in mods and (tmp_path / "run" / "summary.json").exists()
    assert not mods & {"typer", "pydantic", "rich"}, mods & {"typer", "pydantic", "rich"}
    assert "avg_jct_s" in out.stdout and "wrote " in out.stderr


def test_help_imports_no_config_and_no_numpy(tmp_path: Path) -> None:
    mods = _modules(["--help"], tmp_path)
    assert "typer" in mods
    assert not mods & {"numpy", "pydantic", "hrlsched.config", *HEAVY}


def test_measured_backend_needs_scipy_only_to_fill_its_cache(tmp_path: Path, shared_data: Path) -> None:
    args = ["simulate", "--scenario", "pollux-w6", "--policy", "tiresias-pollux", "--no-plots", "--out"]
    env = {"HRLSCHED_DATA": str(shared_data), "HRLSCHED_CACHE_DIR": str(tmp_path / "cache")}
    first = _modules([*args, str(tmp_path / "a")], tmp_path, **env)
    again = _modules([*args, str(tmp_path / "b")], tmp_path, **env)
    assert "scipy" in first  # triangulates once
    assert not again & set(HEAVY), again & set(HEAVY)
    a, b = (json.loads((tmp_path / r / "summary.json").read_text()) for r in "ab")
    assert a["jobs_completed"] == b["jobs_completed"] == 160
    assert abs(a["avg_jct_s"] - b["avg_jct_s"]) <= 1e-9 * a["avg_jct_s"]


def test_policies_name_the_learned_schedulers_without_importing_them() -> None:
    """The registry names ``hrl``, ``dl2`` and ``harmony`` by ``"module:attr"``:
    no module under ``policies/`` imports the agent or its rivals, not even
    inside a function (they import the environments, which import the
    registry)."""
    import hrlsched.policies

    root = Path(hrlsched.policies.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}:{node.lineno} {n}" for n in names
                      if n.startswith(("hrlsched.agent", "hrlsched.rivals"))]
    assert not found, found


def test_learned_entries_name_their_schedulers() -> None:
    pytest.importorskip("torch")
    from hrlsched.contract import Scheduler
    from hrlsched.policies.registry import LAZY, SCHEDULERS

    for name, target in LAZY.items():
        module, _, attr = target.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        assert issubclass(cls, Scheduler) and cls.name == name and name in SCHEDULERS, target
