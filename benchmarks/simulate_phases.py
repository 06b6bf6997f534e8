"""Where the CPU time of one whole `hrlsched simulate` goes: a fresh process
imports what the command imports, in the order it does, then builds the
scenario, simulates and writes the run directory, and prints the CPU
milliseconds of each phase (median over the runs; the interpreter's own
start-up is `python -c pass`, timed apart).

    .venv/bin/python benchmarks/simulate_phases.py [--scenario pollux-w6] [--policy tiresias-pollux] [--repeats 5]

The whole-process figure users see is `hrlsched reproduce pollux-sim` (or
`benchmarks/import_time.py`); this one says which part to work on.
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

PROBE = r"""
import gc, json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the console script's simulate
gc.disable()  # as it: no collection during the imports, what they made frozen after (below)
T = [("start", time.process_time())]
def mark(name):
    T.append((name, time.process_time()))
import numpy; mark("numpy")
import yaml; mark("yaml")
from hrlsched.config import dump_run_config, resolve_run_config; mark("hrlsched.config (settings, cluster)")
cfg = resolve_run_config(sys.argv[1], sys.argv[2], None, [])
from hrlsched.policies.registry import make_scheduler
from hrlsched.scenario import build_scenario
from hrlsched.sim.engine import Simulator
from hrlsched.sim.recorder import write_run; mark("policies, engine, workload modules")
gc.freeze(); gc.enable()
built = build_scenario(cfg.scenario, cfg.seed); mark("build scenario (traces, perf model)")
sched = make_scheduler(cfg.policy, checkpoint=cfg.checkpoint)
res = Simulator(built.topology, built.jobs, built.perf, sched, built.engine, seed=cfg.seed,
                predictor=built.predictor).run(); mark("simulate")
write_run(sys.argv[3], res, dump_run_config(cfg), cfg.policy, cfg.scenario.name, plots_on=False); mark("write run dir")
print(json.dumps([[b[0], 1000 * (b[1] - a[1])] for a, b in zip(T, T[1:])] + [["rounds", len(res.rounds["time_s"])],
                 ["scheduler calls", res.scheduler_calls]]))
sys.stdout.flush(); os._exit(0)  # as it: no interpreter teardown
"""


def cpu_ms(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="pollux-w6")
    ap.add_argument("--policy", default="tiresias-pollux")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="simulate_phases-") as tmp:
        env = dict(os.environ)
        cpu_ms([sys.executable, "-c", PROBE, a.scenario, a.policy, str(Path(tmp) / "warm")], env)  # fills caches
        runs, whole = [], []
        for i in range(a.repeats):
            ms, out = cpu_ms([sys.executable, "-c", PROBE, a.scenario, a.policy, str(Path(tmp) / f"r{i}")], env)
            runs.append(dict(json.loads(out.strip().splitlines()[-1])))
            whole.append(ms)
        bare = statistics.median(cpu_ms([sys.executable, "-c", "pass"], env)[0] for _ in range(a.repeats))
    t0 = time.strftime("%Y-%m-%d")
    print(f"{a.scenario} / {a.policy}: CPU ms of each phase, median of {a.repeats} fresh processes ({t0})")
    print(f"  {'interpreter start (python -c pass)':<40} {bare:7.0f}")
    for k in runs[0]:
        if k in ("rounds", "scheduler calls"):
            continue
        print(f"  {k:<40} {statistics.median(r[k] for r in runs):7.0f}")
    print(f"  {'whole process':<40} {statistics.median(whole):7.0f}")
    print(f"  ({runs[0]['rounds']} rounds, {runs[0]['scheduler calls']} scheduler calls)")


if __name__ == "__main__":
    main()
