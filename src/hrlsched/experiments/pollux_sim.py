"""Our simulator against the Pollux authors' simulator, on the same workload
and policy, in one run on the same machine, both timed as whole processes
(interpreter start, imports, reading the traces, simulating, writing results):
what a user waits for.

The Pollux simulator (petuum/adaptdl, branch osdi21-artifact, `simulator/`)
is not part of this project. Get it once, beside the project, with the
versions of its time (its requirements.txt pins numpy 1.19, pandas 1.1,
scipy 1.5; `simulator.py` also imports autograd and pymoo for its Pollux
policy, even when it runs Tiresias):

    git clone --branch osdi21-artifact --depth 1 https://github.com/petuum/adaptdl ../adaptdl
    python3.8 -m venv ../adaptdl/.venv
    ../adaptdl/.venv/bin/pip install numpy==1.19.5 pandas==1.1.5 scipy==1.5.4 autograd pymoo==0.4.2.2

then `hrlsched reproduce pollux-sim --pollux-dir ../adaptdl/simulator`
(or set POLLUX_SIM_DIR; POLLUX_PYTHON names its interpreter, by default
`.venv/bin/python` or `venv/bin/python` in the folder above the simulator).
Without it, the command says that it could not time theirs and compares our
JCT with the authors' published result instead.

Ours runs as `hrlsched simulate --scenario pollux-w<N> --policy
tiresias-pollux --no-plots`. Its first run on a machine parses the Pollux
traces and triangulates them (scipy), and keeps both in a cache; the command
runs that first, cold run in a fresh cache folder and prints its time
apart; the median is over the runs after it, as a user sees every run but
the first.

Targets: our whole-process wall time at least 20x lower; our average JCT
within 15% of theirs.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICIES = {"tiresias": "tiresias-pollux"}  # the Pollux simulator's policy -> ours


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def hrlsched_command() -> list[str]:
    """The `hrlsched` script that users run, next to this interpreter; else `python -m`."""
    script = Path(sys.executable).parent / "hrlsched"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hrlsched.entry"]


def run_ours(policy: str, workload: int, repeats: int, data: Path) -> dict[str, float]:
    """Our simulator, whole processes: the cold first run (a fresh trace
    cache), then ``repeats`` runs (median wall and CPU), and its average JCT."""
    work = Path(tempfile.mkdtemp(prefix="pollux-sim-"))
    env = {**os.environ, "HRLSCHED_CACHE_DIR": str(work / "cache"), "HRLSCHED_DATA": str(data)}
    cmd = [*hrlsched_command(), "simulate", "--scenario", f"pollux-w{workload}",
           "--policy", POLICIES.get(policy, policy), "--no-plots", "--out"]
    try:
        runs = [timed([*cmd, str(work / f"run{i}")], work, env) for i in range(repeats + 1)]
        summ = json.loads((work / f"run{repeats}" / "summary.json").read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if summ["jobs_completed"] != summ["jobs_total"]:
        raise RuntimeError(f"{summ['jobs_total'] - summ['jobs_completed']} jobs did not finish")
    warm = runs[1:]
    return {"cold_wall": runs[0][0], "wall": statistics.median(w for w, _, _ in warm),
            "cpu": statistics.median(c for _, c, _ in warm), "jct": float(summ["avg_jct_s"])}


def pollux_python(sim_dir: Path, given: Path | None) -> Path:
    """The Pollux simulator's interpreter: ``given``, else a venv beside it."""
    if given:
        return Path(given).absolute()  # not resolve(): a venv's python is a link that must stay one
    for venv in (".venv", "venv"):
        p = sim_dir.parent / venv / "bin" / "python"
        if p.exists():
            return p.absolute()
    raise FileNotFoundError(f"no interpreter for the Pollux simulator: give --pollux-python "
                            f"(looked in {sim_dir.parent}/.venv and venv)")


def run_pollux(sim_dir: Path, python: Path, policy: str, workload: int, repeats: int) -> dict[str, float]:
    """The Pollux authors' simulator, whole processes: median wall and CPU, and its average JCT."""
    cmd = [str(python), "simulator.py", "--policy", policy, f"workloads/workload-{workload}.csv"]
    runs = [timed(cmd, sim_dir) for _ in range(repeats)]
    found = re.findall(r"Average JCT:\s*([0-9.]+)", runs[-1][2])  # printed every round; the last is final
    if not found:
        raise RuntimeError(f"no 'Average JCT' in the Pollux simulator's output:\n{runs[-1][2][-2000:]}")
    return {"wall": statistics.median(w for w, _, _ in runs), "cpu": statistics.median(c for _, c, _ in runs),
            "jct": float(found[-1])}


def against_pollux(policy: str = "tiresias", workload: int = 6, sim_dir: Path | None = None,
                   python: Path | None = None, repeats: int = 5, pollux_repeats: int = 3,
                   data: Path | None = None) -> list[str]:
    """Both simulators timed on one workload and policy (see the module's
    docstring): the lines to print. ``sim_dir``: the Pollux simulator's
    folder (None or absent: the published result instead)."""
    from hrlsched.data import data_dir

    data = data or data_dir()
    if not (data / "pollux" / "traces").is_dir():
        raise FileNotFoundError(f"no Pollux traces under {data} (set HRLSCHED_DATA)")
    ours = run_ours(policy, workload, repeats, data)
    name = f"{policy} on Pollux workload-{workload}"
    lines = [f"whole processes, median of {repeats} (ours) and {pollux_repeats} (Pollux) runs:",
             f"hrlsched  {name}: avg JCT {ours['jct']:8.1f} s, wall {ours['wall']:6.2f} s, CPU {ours['cpu']:6.2f} s "
             f"(first run, filling the trace cache: wall {ours['cold_wall']:.2f} s)"]
    sim_dir = Path(sim_dir).resolve() if sim_dir else None
    if sim_dir is not None and (sim_dir / "simulator.py").exists():
        theirs = run_pollux(sim_dir, pollux_python(sim_dir, python), policy, workload, pollux_repeats)
        return [*lines,
                f"Pollux    {name}: avg JCT {theirs['jct']:8.1f} s, wall {theirs['wall']:6.2f} s, "
                f"CPU {theirs['cpu']:6.2f} s",
                f"speed-up {theirs['wall'] / ours['wall']:.1f}x in wall time (target >= 20x), "
                f"{theirs['cpu'] / ours['cpu']:.1f}x in CPU time; "
                f"JCT difference {100 * (ours['jct'] / theirs['jct'] - 1):+.1f}% (target within 15%)"]
    lines.append("Pollux simulator not found (give --pollux-dir; see `hrlsched reproduce pollux-sim --help`): "
                 "could not time it, no speed-up.")
    ref = data / "pollux" / "reference-results" / f"{policy}-1.0" / "summary.json"
    if ref.exists():
        jct = json.loads(ref.read_text())["avgs"][f"workload-{workload}"]
        lines.append(f"published Pollux-simulator result: avg JCT {jct:.1f} s; "
                     f"JCT difference {100 * (ours['jct'] / jct - 1):+.1f}% (target within 15%)")
    return lines
