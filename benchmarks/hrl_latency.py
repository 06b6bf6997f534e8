"""Decision latency of the ``hrl`` policy on one core: the wall time of one
decision point (``HRLScheduler.decide``) on a 1,024-GPU cluster (``default``
scaled to 128 servers) with about 500 active jobs (all arriving at the
start). Target: at most 100 ms per decision point.

Two figures: the first point after the jobs arrive (*cold*: every job is
new, so the predictions of its speeds and the heuristic hint's are
computed then), and the median of the next ``--points`` points, each one
job completion or arrival later (*warm*: the steady state of a running
scheduler, which is what the target is about).

    .venv/bin/python benchmarks/hrl_latency.py [--checkpoint PATH] [--gpus 1024] [--jobs 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default=None, help="agent checkpoint (default: the shipped one)")
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--points", type=int, default=5, help="warm decision points timed after the first")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.simulation import Simulation

    servers = args.gpus // 8
    cfg = resolve_run_config("default", None, 0, [f"cluster.server_groups.0.count={servers}",
                                                  f"workload.jobs={args.jobs}", "workload.duration_h=0.01"])
    built = build_scenario(cfg.scenario, 0)
    pol = HRLScheduler(args.checkpoint)
    cold, warm, steps, jobs = [], [], [], 0
    for r in range(args.repeat):
        sim = Simulation(built.topology, built.jobs, built.perf, built.engine, predictor=built.predictor)
        view = sim.reset(r)
        while view is not None and len(view.jobs) < args.jobs:  # until every job has arrived
            out = sim.step(pol_decide(pol, view, built, r))
            view = out.view
        if view is None:
            raise SystemExit("the workload finished before every job arrived; raise --jobs or shorten arrivals")
        jobs = len(view.jobs)
        pol.reset(built.topology, np.random.default_rng(r))
        for i in range(args.points + 1):
            s0 = pol.steps
            t0 = time.perf_counter()
            dec = pol.decide(view)
            (cold if i == 0 else warm).append(time.perf_counter() - t0)
            steps.append(pol.steps - s0)
            view = sim.step(dec).view
            if view is None:
                break
    c, w = statistics.median(cold), statistics.median(warm) if warm else float("nan")
    print(f"hrl decision point: {args.gpus} GPUs, {jobs} active jobs, {int(statistics.median(steps))} agent "
          f"actions per point (median)")
    print(f"  first point (cold caches): {c * 1000:.0f} ms (median of {args.repeat})")
    print(f"  later points (warm):       {w * 1000:.0f} ms (median of {len(warm)}); target 100 ms")


def pol_decide(pol, view, built, r):  # noqa: ANN001, ANN201
    """An empty decision while the jobs arrive (nothing runs yet)."""
    from hrlsched.contract import Decision

    return Decision(placements={})


if __name__ == "__main__":
    main()
