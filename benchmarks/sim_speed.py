"""Simulator speed: simulated rounds and jobs per second of wall time for the
`default` scenario scaled to 64, 512 and 4,096 GPUs (workload scaled in
proportion; 10,000 jobs on 4,096 GPUs), under FIFO.

Targets (issue 2): `default` (64 GPUs) under 2 s wall; 4,096 GPUs with 10,000
jobs under 2 minutes. Run: `make bench` or `.venv/bin/python benchmarks/sim_speed.py`.
"""

from __future__ import annotations

import argparse
import time

from hrlsched.config import resolve_run_config
from hrlsched.run import simulate

SIZES = [(8, 200, 2), (64, 1600, 8), (512, 10000, 32)]  # servers of 8 GPUs, jobs, racks
TARGETS = {64: 2.0, 4096: 120.0}


def run(servers: int, jobs: int, racks: int, policy: str, backend: str | None) -> tuple[float, int, int, float]:
    sets = [f"cluster.server_groups.0.count={servers}", f"workload.jobs={jobs}", f"cluster.racks={racks}"]
    if backend:
        sets.append(f"perf.backend={backend}")
    cfg = resolve_run_config("default", policy, 0, sets)
    t0 = time.perf_counter()
    res = simulate(cfg)
    wall = time.perf_counter() - t0
    return wall, int(res.rounds["time_s"].size), int((res.finish_s == res.finish_s).sum()), res.end_time_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--backend", default=None, help="perf backend (default: the scenario's)")
    ap.add_argument("--max-gpus", type=int, default=4096)
    a = ap.parse_args()
    run(1, 5, 1, a.policy, a.backend)  # warm-up: lazy imports and first-call caches are not simulation time
    print(f"{'GPUs':>6} {'jobs':>6} {'rounds':>7} {'wall s':>8} {'rounds/s':>9} {'jobs/s':>8} {'target s':>9} {'ratio':>6}")
    for servers, jobs, racks in SIZES:
        gpus = servers * 8
        if gpus > a.max_gpus:
            continue
        wall, rounds, done, _ = run(servers, jobs, racks, a.policy, a.backend)
        tgt = TARGETS.get(gpus)
        ratio = f"{tgt / wall:6.1f}x" if tgt else ""
        print(f"{gpus:>6} {jobs:>6} {rounds:>7} {wall:>8.2f} {rounds / wall:>9.0f} {done / wall:>8.0f} "
              f"{tgt if tgt else '':>9} {ratio}")


if __name__ == "__main__":
    main()
