"""Speed of the environments on ``default``: env steps per second with random
masked actions (one process, one core), and the wall time of one whole
random-policy episode (reset included). Targets: >= 5,000 steps/s, an
episode under 10 s.

    .venv/bin/python benchmarks/env_speed.py [--env hrlsched/Allocation-v0] [--seed 0] [--breakdown] [--episodes 10]
        [--workloads 4]

A full garbage collection runs after the warm-up episode (``--no-collect``:
not): the process's first full collection after the imports (some 20 ms
here, over every object of the process) otherwise falls in the measured
episode of ``Placement-v0`` (0.14 s), where it is a seventh of the time,
while over the next thirty episodes the collector makes no other full
collection (a start-up cost, not a per-step one). The figures print the
collector's time in what they measure.

``--breakdown`` also times, call by call, where the measured episode spends
its time: the engine's steps (and in them the performance model's solves,
the terms built for placements first seen, advancing the clock), the
agent's actions, the observations, and the decision points' set-up, split
by whether the agent had a choice there.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import hrlsched.envs  # noqa: F401


class GCTime:
    """Seconds the cyclic garbage collector ran, and its full collections,
    since ``start`` (a ``gc.callbacks`` entry): one full collection walks
    every object of the process (some 20 ms here after the imports), so
    whether it falls in a 0.14 s episode moves that episode's figure by
    about a seventh."""

    def __init__(self) -> None:
        self.seconds, self.full, self._t = 0.0, 0, 0.0
        gc.callbacks.append(self._cb)

    def start(self) -> None:
        self.seconds, self.full = 0.0, 0

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t
            self.full += info["generation"] == 2


GC = GCTime()


def episode(env: gym.Env, seed: int) -> tuple[int, float, float, dict]:
    rng = np.random.default_rng(seed)
    GC.start()
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
    return steps, t2 - t0, t2 - t1, {**info, "return": total, "cpu": c2 - c0, "cpu_stepping": c2 - c1,
                                     "gc_s": GC.seconds, "gc_full": GC.full}


def timed(parts: list[tuple[type, str, bool]]) -> tuple[dict[str, float], collections.Counter, Callable[[], None]]:
    """Wrap each (class, method, split by result) with a timer; returns the
    totals, the call counts and a function that restores the methods."""
    total: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    saved = []

    def wrap(cls: type, name: str, split: bool) -> None:
        f = getattr(cls, name)
        saved.append((cls, name, f))

        def g(*a, **k):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            r = f(*a, **k)
            key = f"{cls.__name__}.{name}" + (f" -> {r}" if split else "")
            total[key] += time.perf_counter() - t
            calls[key] += 1
            return r
        setattr(cls, name, g)

    for cls, name, split in parts:
        wrap(cls, name, split)

    def restore() -> None:
        for cls, name, f in saved:
            setattr(cls, name, f)
    return total, calls, restore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", action="append", help="environment id (repeatable; default: all three)")
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-collect", dest="collect", action="store_false",
                    help="no full garbage collection after the warm-up episode (the process's first then falls in "
                         "the measured one)")
    ap.add_argument("--breakdown", action="store_true", help="time the parts of the measured episode, call by call")
    ap.add_argument("--episodes", type=int, default=1,
                    help="also measure this many more episodes after the first (action seeds seed+1, ...) and "
                         "print their steps over their CPU seconds: a sustained run, where a full garbage "
                         "collection falls in one episode of several; and the peak memory after them (the "
                         "caches of placements are bounded: see docs/environments.md)")
    ap.add_argument("--workloads", type=int, default=1,
                    help="workload seeds in the pool, seed..seed+N-1, one drawn at each reset (default 1: the "
                         "same workload every episode; more, with --episodes, shows memory over many workloads)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    ids = args.env or ["hrlsched/Allocation-v0", "hrlsched/Placement-v0", "hrlsched/Hierarchical-v0"]
    for env_id in ids:
        env = gym.make(env_id, scenario=args.scenario, seeds=list(range(args.seed, args.seed + max(args.workloads, 1)))).unwrapped
        episode(env, args.seed + 100)  # warm-up: builds the scenario and fills the model's caches
        if args.collect:
            gc.collect()
        if args.breakdown:
            from hrlsched.envs.decision import DecisionPoint
            from hrlsched.perf.analytic import AnalyticModel
            from hrlsched.sim.simulation import Simulation

            total, calls, restore = timed([
                (Simulation, "step", False), (Simulation, "_advance", False), (AnalyticModel, "speeds", False),
                (AnalyticModel, "_build_terms", False), (DecisionPoint, "act", False),
                (DecisionPoint, "observation", False), (DecisionPoint, "begin", True)])
        steps, wall, stepping, info = episode(env, args.seed)
        if args.breakdown:
            restore()
            print(f"  {env_id}: {stepping * 1e3:.0f} ms stepping (timers included); per part (a part inside another "
                  "is counted in both; begin -> True: the agent has a choice):")
            for key in sorted(total, key=lambda x: -total[x]):
                print(f"    {key:34s} {calls[key]:6d} calls {total[key] * 1e3:7.1f} ms {total[key] / calls[key] * 1e6:7.1f} us")
        print(f"{env_id:26s} {args.scenario}: {steps} steps, {info['decision_points']} decision points, "
              f"{steps / stepping:,.0f} steps/s, episode {wall:.2f} s (reset included), "
              f"return {info['return']:.1f}, idle rescues {info['idle_rescues']}; CPU time: "
              f"{steps / info['cpu_stepping']:,.0f} steps/cpu-s, episode {info['cpu']:.2f} cpu-s, "
              f"garbage collection {info['gc_s'] * 1e3:.0f} ms ({info['gc_full']} full), "
              f"load average {os.getloadavg()[0]:.1f}")
        if args.episodes > 1:
            runs = [episode(env, args.seed + i) for i in range(1, args.episodes)]
            n = steps + sum(r[0] for r in runs)
            cpu = info["cpu_stepping"] + sum(r[3]["cpu_stepping"] for r in runs)
            gc_s = info["gc_s"] + sum(r[3]["gc_s"] for r in runs)
            full = info["gc_full"] + sum(r[3]["gc_full"] for r in runs)
            print(f"{'':26s} {args.episodes} episodes: {n} steps, {n / cpu:,.0f} steps/cpu-s, "
                  f"garbage collection {gc_s * 1e3:.0f} ms ({full} full), "
                  f"load average {os.getloadavg()[0]:.1f}{max_rss()}")


def max_rss() -> str:
    """The process's peak resident memory so far (where the platform says)."""
    try:
        import resource
    except ImportError:  # (not on Windows)
        return ""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return f", peak memory {kb / 1024:.0f} MiB"


if __name__ == "__main__":
    main()
