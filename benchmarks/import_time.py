"""Whole-command times, as a user measures them: the wall time of a fresh
process, interpreter start and imports included (median of several runs).

    .venv/bin/python benchmarks/import_time.py [--repeats 7]

prints the time of `python -c pass` (the interpreter alone), of importing
`hrlsched.cli`, of `hrlsched --help`, and of `hrlsched simulate --scenario
default --no-plots` (and with plots), and which of numpy, pydantic, scipy,
matplotlib, pandas and torch each command loads. Targets: `--help` without
numpy or pydantic; `simulate --no-plots` without typer, pydantic, rich (no terminal here), scipy,
matplotlib, pandas or torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WATCH = ("numpy", "pydantic", "yaml", "typer", "rich", "scipy", "matplotlib", "pandas", "torch")
# Runs the console script's entry in-process and reports which watched packages it loaded.
PROBE = (
    "import json, os, sys\n"
    "os._exit = sys.exit  # simulate's fast path ends by os._exit: here an exit that can be caught\n"
    "from hrlsched.entry import main\n"
    "sys.argv = ['hrlsched', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(WATCH)!r}))))\n"
)


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def loaded(args: list[str], env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    script = Path(sys.executable).parent / "hrlsched"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "hrlsched.entry"]
    with tempfile.TemporaryDirectory(prefix="import_time-") as tmp:
        env = {**os.environ, "HRLSCHED_CACHE_DIR": str(Path(tmp) / "cache")}
        sim = ["simulate", "--scenario", "default", "--out", str(Path(tmp) / "run")]
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"], None),
            ("import hrlsched.cli", [sys.executable, "-c", "import hrlsched.cli"], None),
            ("hrlsched --help", [*cli, "--help"], ["--help"]),
            ("hrlsched simulate --scenario default --no-plots", [*cli, *sim, "--no-plots"], [*sim, "--no-plots"]),
            ("hrlsched simulate --scenario default (2 plots)", [*cli, *sim], None),
        ]
        print(f"whole process, median of {a.repeats} runs (wall s)")
        for label, cmd, probe in rows:
            wall(cmd, env)  # warm the file cache
            t = statistics.median(wall(cmd, env) for _ in range(a.repeats))
            mods = f"  loads: {', '.join(loaded(probe, env)) or '-'}" if probe else ""
            print(f"  {label:<50} {t:6.2f}{mods}")


if __name__ == "__main__":
    main()
