"""Speed of the analytic performance model: speeds of 500 running jobs on
4,096 GPUs (512 servers of 8, 32 racks), target under 50 ms; and the default
scenario under FIFO with this model, target under 2 s wall.

"cold": first call (every job's traffic rows built); "warm": a call after
one job moved (rows cached per placement signature, fixed point over all).
The scenario is timed twice: the simulation in this process, and the whole
command (`hrlsched simulate --scenario default --policy fifo`, i.e. `make
demo`: interpreter start, imports, run, CSV/JSON and, unless --no-plots,
the PNG plots).
Run: `make bench` or `.venv/bin/python benchmarks/perf_speed.py`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hrlsched.cluster import Placement, Topology, uniform_cluster
from hrlsched.config import resolve_run_config
from hrlsched.core.catalogue import CATALOGUE
from hrlsched.core.job import Job
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.run import simulate


def workload(topo: Topology, n: int, rng: np.random.Generator) -> tuple[list[Job], list[Placement]]:
    models = sorted(CATALOGUE)
    free = rng.permutation(topo.n_gpus)
    jobs, pls, at = [], [], 0
    for i in range(n):
        w = int(rng.choice([1, 2, 4, 8, 16], p=[0.5, 0.15, 0.15, 0.15, 0.05]))
        m = models[int(rng.integers(len(models)))]
        arch = "ps" if rng.random() < 0.6 else "allreduce"
        start = int(rng.integers(0, topo.n_servers)) * 8 if rng.random() < 0.7 else None
        gpus = np.arange(start, start + w) % topo.n_gpus if start is not None else free[at:at + w]
        at += w
        ps = tuple(int(topo.gpu_socket[g]) for g in gpus[: max(1, w // 4)]) if arch == "ps" else ()
        jobs.append(Job(i, 0.0, m, 1e6, CATALOGUE[m].default_batch * w, w, len(ps) or 1, arch=arch))
        pls.append(Placement(tuple(int(g) for g in gpus), ps))
    return jobs, pls


def main() -> None:
    topo = Topology.from_spec(uniform_cluster(512, 8, racks=32))
    rng = np.random.default_rng(0)
    jobs, pls = workload(topo, 500, rng)
    model = AnalyticModel(topo, CATALOGUE)
    t0 = time.perf_counter()
    model.speeds(jobs, pls)
    cold = time.perf_counter() - t0
    warm = []
    for k in range(20):
        i = int(rng.integers(len(jobs)))
        g = tuple((x + 8 * (k + 1)) % topo.n_gpus for x in pls[i].gpus)
        pls[i] = Placement(g, pls[i].ps_sockets)
        t0 = time.perf_counter()
        model.speeds(jobs, pls)
        warm.append(time.perf_counter() - t0)
    w = float(np.median(warm))
    print(f"analytic speeds, 500 jobs on {topo.n_gpus} GPUs: cold {1e3 * cold:.1f} ms, warm {1e3 * w:.1f} ms "
          f"(target 50 ms: {50e-3 / w:.1f}x margin warm, {50e-3 / cold:.1f}x cold)")
    cfg = resolve_run_config("default", "fifo", 0, ["perf.backend=analytic"])
    t0 = time.perf_counter()
    res = simulate(cfg)
    wall = time.perf_counter() - t0
    print(f"default scenario, FIFO, analytic backend: {wall:.2f} s wall for {res.rounds['time_s'].size} rounds "
          f"(target 2 s: {2.0 / wall:.1f}x margin)")
    exe = Path(sys.executable).with_name("hrlsched")
    for extra in ([], ["--no-plots"]):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            subprocess.run([str(exe), "simulate", "--scenario", "default", "--policy", "fifo", "--out", out, *extra],
                           check=True, capture_output=True)
            wall = time.perf_counter() - t0
        print(f"hrlsched simulate --scenario default --policy fifo {' '.join(extra)}: {wall:.2f} s wall, whole command "
              f"(target 2 s: {2.0 / wall:.2f}x)")


if __name__ == "__main__":
    main()
