"""Our simulator against the Pollux authors' simulator, on the same workload
and policy, in one run on the same machine.

The Pollux simulator (petuum/adaptdl, branch osdi21-artifact, `simulator/`)
is not part of this project. Get it once, beside the project:

    git clone --branch osdi21-artifact --depth 1 https://github.com/petuum/adaptdl ../adaptdl
    python3 -m venv ../adaptdl/venv
    ../adaptdl/venv/bin/pip install "numpy<2" "pandas<2" scipy autograd "pymoo==0.4.2.2"

then `python benchmarks/vs_pollux.py --pollux-dir ../adaptdl/simulator`
(or set POLLUX_SIM_DIR; POLLUX_PYTHON names its interpreter, by default
the `venv/bin/python` next to the simulator folder). Without it, the script
says so and compares our JCT with the authors' published result instead.

Targets: our wall time at least 20x lower; our average JCT within 15% of theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hrlsched.config import resolve_run_config
from hrlsched.run import simulate

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("HRLSCHED_DATA", REPO.parent / "shared" / "data"))
POLICIES = {"tiresias": "tiresias-pollux"}


def run_pollux(sim_dir: Path, python: Path, policy: str, workload: int) -> tuple[float, float]:
    cmd = [str(python), "simulator.py", "--policy", policy, f"workloads/workload-{workload}.csv"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=sim_dir, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    found = re.findall(r"Average JCT:\s*([0-9.]+)", out)  # printed every round; the last is the final one
    if not found:
        raise RuntimeError(f"no 'Average JCT' in the Pollux simulator's output:\n{out[-2000:]}")
    return wall, float(found[-1])


def run_ours(policy: str, workload: int, repeats: int) -> tuple[float, float]:
    cfg = resolve_run_config(f"pollux-w{workload}", POLICIES.get(policy, policy), 0)
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = simulate(cfg)
        walls.append(time.perf_counter() - t0)
    arrival = np.array([j.arrival_s for j in res.jobs])
    jct = res.finish_s - arrival
    if np.isnan(jct).any():
        raise RuntimeError(f"{int(np.isnan(jct).sum())} jobs did not finish")
    return float(np.median(walls)), float(jct.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="tiresias")
    ap.add_argument("--workload", type=int, default=6)
    ap.add_argument("--pollux-dir", type=Path, default=os.environ.get("POLLUX_SIM_DIR"))
    ap.add_argument("--pollux-python", type=Path, default=os.environ.get("POLLUX_PYTHON"))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    try:
        ours_wall, ours_jct = run_ours(a.policy, a.workload, a.repeats)
    except FileNotFoundError as e:
        print(f"skipped: {e}")
        return
    print(f"hrlsched  {a.policy} on Pollux workload-{a.workload}: avg JCT {ours_jct:8.1f} s, wall {ours_wall:6.2f} s")
    if a.pollux_dir and (Path(a.pollux_dir) / "simulator.py").exists():
        python = a.pollux_python or Path(a.pollux_dir).parent / "venv" / "bin" / "python"
        wall, jct = run_pollux(Path(a.pollux_dir), Path(python), a.policy, a.workload)
        print(f"Pollux    {a.policy} on Pollux workload-{a.workload}: avg JCT {jct:8.1f} s, wall {wall:6.2f} s")
        print(f"speed-up {wall / ours_wall:.1f}x (target >= 20x); "
              f"JCT difference {100 * (ours_jct / jct - 1):+.1f}% (target within 15%)")
        return
    ref = DATA / "pollux" / "reference-results" / f"{a.policy}-1.0" / "summary.json"
    print("Pollux simulator not found (give --pollux-dir; see this script's docstring): no speed comparison.")
    if ref.exists():
        jct = json.loads(ref.read_text())["avgs"][f"workload-{a.workload}"]
        print(f"published Pollux-simulator result: avg JCT {jct:.1f} s; "
              f"JCT difference {100 * (ours_jct / jct - 1):+.1f}% (target within 15%)")
    sys.exit(0)


if __name__ == "__main__":
    main()
