"""Speed of the environments on ``default``: env steps per second with random
masked actions (one process, one core), and the wall time of one whole
random-policy episode (reset included). Targets: >= 5,000 steps/s, an
episode under 10 s.

    .venv/bin/python benchmarks/env_speed.py [--env hrlsched/Allocation-v0] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np

import hrlsched.envs  # noqa: F401


def episode(env: gym.Env, seed: int) -> tuple[int, float, float, dict]:
    rng = np.random.default_rng(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    _, info = env.reset(seed=seed)
    t1, c1 = time.perf_counter(), time.process_time()
    steps, total, done = 0, 0.0, False
    while not done:
        valid = np.flatnonzero(info["action_mask"])
        _, r, te, tr, info = env.step(int(valid[rng.integers(valid.size)]))
        total += r
        steps += 1
        done = te or tr
    t2, c2 = time.perf_counter(), time.process_time()
    # CPU seconds too: on a shared machine the wall clock also counts other processes' turns
    return steps, t2 - t0, t2 - t1, {**info, "return": total, "cpu": c2 - c0, "cpu_stepping": c2 - c1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", action="append", help="environment id (repeatable; default: all three)")
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    ids = args.env or ["hrlsched/Allocation-v0", "hrlsched/Placement-v0", "hrlsched/Hierarchical-v0"]
    for env_id in ids:
        env = gym.make(env_id, scenario=args.scenario, seeds=[args.seed]).unwrapped
        episode(env, args.seed + 100)  # warm-up: builds the scenario and fills the model's caches
        steps, wall, stepping, info = episode(env, args.seed)
        print(f"{env_id:26s} {args.scenario}: {steps} steps, {info['decision_points']} decision points, "
              f"{steps / stepping:,.0f} steps/s, episode {wall:.2f} s (reset included), "
              f"return {info['return']:.1f}, idle rescues {info['idle_rescues']}; CPU time: "
              f"{steps / info['cpu_stepping']:,.0f} steps/cpu-s, episode {info['cpu']:.2f} cpu-s, "
              f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
