"""Decision latency of the ``hrl`` policy on one core: the wall time of one
decision point (``HRLScheduler.decide``) on a 1,024-GPU cluster (``default``
scaled to 128 servers; ``--scenario``: another scenario's cluster, each of its
server groups scaled alike, e.g. ``hetero``'s three GPU types at 85 servers
of 4 each, 1,020 GPUs) with about 500 active jobs (all arriving at the
start). Target: at most 100 ms per decision point.

Three figures:

- the process's first decision point ever (*warm-up*): besides what the
  next figure covers, the performance model prices each model's allocations
  for the first time (kept for the life of the process);
- the first point after the 500 jobs arrive at once (*burst*), repeated
  ``--repeat`` times on fresh simulations (the scheduler reset each time,
  so its per-episode caches start empty): every job is new, so its
  candidates, speeds and hint are computed then, and all 500 are placed;
- the next ``--points`` points of each repetition, each one job completion
  or arrival later (*steady*: a running scheduler).

Median and largest of each. A full garbage collection that falls inside a
point adds the time to scan the whole heap (about 180,000 objects, most of
them torch's and numpy's modules: 40-90 ms here). A latency-sensitive
service freezes what it holds after start-up (``gc.collect()`` then
``gc.freeze()``: those objects are never scanned again), and so does this
benchmark after loading the policy; ``--no-freeze`` times it without.

    .venv/bin/python benchmarks/hrl_latency.py [--checkpoint PATH] [--scenario default] [--gpus 1024] [--jobs 500] [--take POLICY]

``--against CHECKPOINT`` times the burst point of two agents on the same views, one after the
other in one process (the first of each pair alternating), and prints their ratio per
repetition: on a shared machine whose speed changes by half from one minute to the next, the
ratio holds where the separate figures do not.

``--take`` times every point as one where the point selector takes that
heuristic's whole decision (the agent's own decision is made first, then the
heuristic's): the cost of such a point, which the shipped agent's selector
decides point by point.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time


def machine() -> str:
    """The CPU and the load, printed with the figures: a point's time scales with the core's speed,
    which differs several-fold between the machines this project runs on (docs/performance.md)."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"machine: {model}, {os.cpu_count()} cores{load}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default=None, help="agent checkpoint (default: the shipped one)")
    ap.add_argument("--gpus", type=int, default=1024, help="the cluster's GPUs (about: whole servers of each group)")
    ap.add_argument("--scenario", default="default",
                    help="whose cluster and workload generator (its server groups scaled to --gpus; e.g. hetero)")
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5, help="burst points timed (after the warm-up one)")
    ap.add_argument("--points", type=int, default=5, help="steady decision points timed after each burst")
    ap.add_argument("--freeze", action=argparse.BooleanOptionalAction, default=True,
                    help="freeze the heap after loading the policy (gc.freeze)")
    ap.add_argument("--take", default=None, metavar="POLICY",
                    help="time every point as one where the point selector takes this heuristic's decision "
                         "(e.g. 'optimus-tuned+migrate/f=0'): its cost there, the agent's own decision and the heuristic's")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time the parts of the warm-up and burst points, call by call (timers included)")
    ap.add_argument("--priced", type=int, default=None, metavar="N",
                    help="a learned placement choice chooses for at most N jobs per point (default: its "
                         "PRICED_PER_POINT; a large N: every job placed anew; 0: none, pack's placement)")
    ap.add_argument("--against", default=None, metavar="CHECKPOINT",
                    help="instead: time the burst point of --checkpoint and of this checkpoint on the same views, "
                         "alternately within one process (the order swapped each repetition), and print their "
                         "ratio per repetition: a comparison that a machine's slow spells do not bias")
    ap.add_argument("--run", default=None, metavar="SCENARIO",
                    help="instead: time every decision point of one whole episode of this scenario (with --set)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="--run: override a scenario value")
    ap.add_argument("--seed", type=int, default=0, help="--run: the episode's seed")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    if args.run is not None:
        return run_episode(args)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.simulation import Simulation

    groups = resolve_run_config(args.scenario, None, 0, []).scenario.cluster.server_groups
    per = [g.gpus_per_server for g in groups]
    scale = args.gpus / sum(g.count * n for g, n in zip(groups, per))
    counts = [max(1, round(g.count * scale)) for g in groups]
    cfg = resolve_run_config(args.scenario, None, 0, [*(f"cluster.server_groups.{i}.count={c}" for i, c in enumerate(counts)),
                                                      f"workload.jobs={args.jobs}", "workload.duration_h=0.01"])
    n_gpus = sum(c * n for c, n in zip(counts, per))
    built = build_scenario(cfg.scenario, 0)
    if args.against is not None:
        return paired(args, built, n_gpus)
    pol = agent(args)
    if args.take is not None:
        from hrlsched.agent.selector import SELECTOR_POLICIES

        if pol.selector is None or args.take not in SELECTOR_POLICIES:
            raise SystemExit(f"--take: expected one of {SELECTOR_POLICIES} and a checkpoint with a point selector")
        take = SELECTOR_POLICIES.index(args.take)
        own_choice = pol.selector.choose  # still computed (its features), then overruled
        pol.selector.choose = lambda view, own: (own_choice(view, own), take)[1]  # type: ignore[method-assign]
    parts: dict[str, list[float]] = {}  # --breakdown: per part, its time at the warm-up point, then each burst point
    if args.breakdown:
        from env_speed import timed  # (benchmarks/ is the script's folder)
        from hrlsched.agent.nets import HRLNet
        from hrlsched.agent.placement_choice import PlacementChoice
        from hrlsched.agent.policy import CandidateScorer
        from hrlsched.envs.decision import DecisionPoint
        from hrlsched.envs.masks import HeuristicFeasibility
        from hrlsched.envs.pricing import Pricing
        from hrlsched.policies.optimus import Optimus

        total, _, _ = timed([(Pricing, "price_menus", False), (Optimus, "allocate", False),
                             (HRLNet, "encode", False), (DecisionPoint, "allocation_rows", False),
                             (CandidateScorer, "score", False), (HeuristicFeasibility, "place", False),
                             (DecisionPoint, "_commit", False), (PlacementChoice, "choose", False),
                             (PlacementChoice, "candidates", False), (PlacementChoice, "_slowdowns", False),
                             (PlacementChoice, "features", False), (PlacementChoice, "_neighbours", False),
                             (type(built.perf), "speeds_apart", False)])
    if args.freeze:
        gc.collect()
        gc.freeze()
    first, cold, warm, steps, jobs = 0.0, [], [], [], 0
    placed = {"choices": 0, "departed": 0, "capped": 0}  # the learned placement's, at the timed burst points
    taken = {"burst": 0, "steady": 0}  # timed points where the learned selector took another heuristic's decision
    for r in range(args.repeat + 1):
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
            t_sel = int(pol.selector.taken.sum()) if pol.selector is not None else 0
            if args.breakdown:
                total.clear()
            pc = pol.placement
            before = {k: getattr(pc, k) for k in placed} if pc is not None else {}
            t0 = time.perf_counter()
            dec = pol.decide(view)
            dt = time.perf_counter() - t0
            if pc is not None and r > 0 and i == 0:
                for k in placed:
                    placed[k] += getattr(pc, k) - before[k]
            if args.breakdown and i == 0:
                for key, v in total.items():
                    parts.setdefault(key, []).append(v)
            if i > 0:
                warm.append(dt)
            elif r == 0:  # the warm-up point
                first = dt
            else:
                cold.append(dt)
            steps.append(pol.steps - s0)
            if pol.selector is not None and r > 0 and int(pol.selector.taken.sum()) > t_sel:
                taken["burst" if i == 0 else "steady"] += 1
            view = sim.step(dec).view
            if view is None:
                break

    def ms(x: list[float]) -> str:
        return f"median {statistics.median(x) * 1000:.0f} ms, largest {max(x) * 1000:.0f} ms (of {len(x)})" if x \
            else "none timed"

    print(f"hrl decision point: {args.scenario}'s cluster at {n_gpus} GPUs, {jobs} active jobs, {int(statistics.median(steps))} agent "
          f"actions per point (median); target 100 ms")
    print(f"  {machine()}")
    print(f"  burst (first point after {jobs} arrivals): {ms(cold)}")
    print(f"  steady (later points):                  {ms(warm)}")
    print(f"  warm-up (the process's first point):     {first * 1000:.0f} ms (prices every model's menu once)")
    print(f"  heap after loading the policy: {'frozen (gc.freeze)' if args.freeze else 'not frozen (--no-freeze)'}")
    if pol.selector is not None:
        print(f"  its point selector took another heuristic's whole decision at {taken['burst']} of {len(cold)} burst "
              f"and {taken['steady']} of {len(warm)} steady points timed")
    if pol.placement is not None:
        pc, n = pol.placement, max(len(cold), 1)
        print(f"  its learned placement, per burst point: {placed['choices'] // n} jobs placed anew, "
              f"{(placed['choices'] - placed['capped']) // n} chosen for (at most {pc.priced_per_point}), "
              f"{placed['departed'] / n:g} elsewhere than pack")
    if parts:
        print("  parts (ms, timers included): warm-up point, burst points' median")
        for key, v in sorted(parts.items(), key=lambda kv: -kv[1][0]):
            burst = statistics.median(v[1:]) * 1000 if len(v) > 1 else float("nan")
            print(f"    {key:34s} {v[0] * 1000:7.1f} {burst:7.1f}")


def paired(args: argparse.Namespace, built, n_gpus: int) -> None:  # noqa: ANN001
    """``--against``: the burst point of two agents on the same views, one after the other in
    one process, the first of each pair alternating; the process's first point of each is a
    warm-up, untimed."""
    import numpy as np

    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.sim.simulation import Simulation

    pols = [agent(args), HRLScheduler(args.against)]
    names = [args.checkpoint or "the shipped checkpoint", args.against]
    if args.freeze:
        gc.collect()
        gc.freeze()
    times: list[list[float]] = [[], []]
    jobs = 0
    for r in range(args.repeat + 1):
        sim = Simulation(built.topology, built.jobs, built.perf, built.engine, predictor=built.predictor)
        view = sim.reset(r)
        while view is not None and len(view.jobs) < args.jobs:
            view = sim.step(pol_decide(None, view, built, r)).view
        if view is None:
            raise SystemExit("the workload finished before every job arrived; raise --jobs or shorten arrivals")
        jobs = len(view.jobs)
        for i in ((0, 1) if r % 2 else (1, 0)):
            pols[i].reset(built.topology, np.random.default_rng(r))
            t0 = time.perf_counter()
            pols[i].decide(view)
            if r > 0:
                times[i].append(time.perf_counter() - t0)
    ratio = [a / b for a, b in zip(*times)]
    print(f"burst point, {args.scenario}'s cluster at {n_gpus} GPUs, {jobs} active jobs, {args.repeat} repetitions "
          f"alternated in one process; target 100 ms")
    print(f"  {machine()}")
    for name, t in zip(names, times):
        print(f"  {name}: median {statistics.median(t) * 1000:.0f} ms, largest {max(t) * 1000:.0f} ms")
    print(f"  ratio, first over second, per repetition: median {statistics.median(ratio):.2f} "
          f"(from {min(ratio):.2f} to {max(ratio):.2f})")


def run_episode(args: argparse.Namespace) -> None:
    """``--run``: every decision point of one episode, timed; apart, the points
    where the point selector took another heuristic's decision (two decisions there)."""
    import torch

    torch.set_num_threads(1)
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    pol = agent(args)
    times: dict[bool, list[float]] = {False: [], True: []}
    jobs: list[int] = []
    decide = pol.decide

    def timed(view):  # noqa: ANN001, ANN202
        t_sel = int(pol.selector.taken.sum()) if pol.selector is not None else 0
        t0 = time.perf_counter()
        d = decide(view)
        dt = time.perf_counter() - t0
        took = pol.selector is not None and int(pol.selector.taken.sum()) > t_sel
        times[took].append(dt)
        jobs.append(len(view.jobs))
        return d

    pol.decide = timed  # type: ignore[method-assign]
    cfg = resolve_run_config(args.run, "hrl", args.seed, list(args.sets))
    if args.freeze:
        gc.collect()
        gc.freeze()
    res = simulate(cfg, scheduler=pol)
    n_gpus = sum(g.count * g.gpus_per_server for g in cfg.scenario.cluster.server_groups)
    allt = times[False] + times[True]
    print(f"hrl decision points of one episode: {args.run} {' '.join(args.sets)} seed {args.seed}, {n_gpus} GPUs; "
          f"{len(allt)} points, up to {max(jobs)} active jobs "
          f"(median {int(statistics.median(jobs))}); avg JCT {summary(res, 'hrl', args.run)['avg_jct_s'] / 3600:.3f} h")
    print(f"  {machine()}")

    def ms(x: list[float]) -> str:
        if not x:
            return "none"
        q = sorted(x)
        return (f"median {statistics.median(x) * 1000:.0f} ms, 99th percentile {q[int(0.99 * (len(q) - 1))] * 1000:.0f} ms, "
                f"largest {q[-1] * 1000:.0f} ms (of {len(x)})")

    print(f"  its own decision:                 {ms(times[False])}")
    print(f"  a heuristic's taken (two made):   {ms(times[True])}")
    print(f"  over 100 ms: {sum(t > 0.1 for t in allt)} of {len(allt)} points")
    pc = pol.placement
    if pc is not None:
        print(f"  its learned placement: {pc.choices} jobs placed anew, {pc.choices - pc.capped} chosen for (at most "
              f"{pc.priced_per_point} per point), {pc.departed} elsewhere than pack")


def agent(args: argparse.Namespace):  # noqa: ANN201
    """The ``hrl`` policy of ``--checkpoint``, its learned placement capped at ``--priced`` jobs per point."""
    from hrlsched.agent.policy import HRLScheduler

    pol = HRLScheduler(args.checkpoint)
    if args.priced == 0:
        pol.placement = None
    elif args.priced is not None and pol.placement is not None:
        pol.placement.priced_per_point = args.priced
    return pol


def pol_decide(pol, view, built, r):  # noqa: ANN001, ANN201
    """An empty decision while the jobs arrive (nothing runs yet)."""
    from hrlsched.contract import Decision

    return Decision(placements={})


if __name__ == "__main__":
    main()
