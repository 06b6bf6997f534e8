"""The RL schedulers of the literature against the baselines their papers
beat, paired by seed (evaluation seeds 0..N-1, which training never sees):

- DL2 (allocation) against DRF on ``default`` (the paper: -44% average JCT
  against DRF on its testbed), DRF placed by ``pack`` (its registered
  placement) and by ``balance`` (DL2's own least-loaded rule, so that only
  the allocations differ);
- Harmony (placement; each job's workers and PSs as requested, as
  ``fifo``) against ``fifo+pack`` and ``fifo+random`` on ``comm``
  (``default`` with 10 Gbit/s NICs and PCIe switches shared by 4 GPUs, as
  in ``benchmarks/hrl_quality.py``), where placement and interference matter;
  also against ``fifo+topology`` (the interference-aware heuristic, which
  scores candidate placements with the performance model itself).

``--harmony-allocation optimus`` gives every job of the Harmony match its
workers and PSs by ``optimus`` (Harmony and its baselines alike:
``optimus+pack``, ``optimus+topology``, ``optimus+random``; default: the
allocation the checkpoint was trained with); ``--harmony-set KEY=VALUE``
(repeatable) adds a scenario override to ``comm`` for that match (e.g.
``workload.jobs=100``, a lighter load). ``--harmony-scenario NAME`` plays
the Harmony match on another scenario instead of ``comm`` (a built-in name
or a YAML, ``--harmony-set`` overrides added; e.g. ``ps-small``, small
parameter-server jobs at a moderate load, where ``pack`` is not the best
placement), and ``--harmony-placements pack,balance,topology,random``
chooses the placements Harmony is compared with (each under the match's
allocation; default ``pack,topology,random``).

    .venv/bin/python benchmarks/rl_rivals.py [--seeds 5] [--first-seed 0] [--dl2 PATH] [--harmony PATH]
        [--only dl2|harmony] [--harmony-allocation fifo|optimus] [--harmony-set KEY=VALUE ...]
        [--harmony-scenario NAME] [--harmony-placements pack,balance,topology,random]
    .venv/bin/python benchmarks/rl_rivals.py --dl2-decisions 100   # DL2's choices against DRF's

``--dl2-decisions SEED`` runs DL2 greedy on ``default`` (a held-back seed,
100-104, by convention) and, at each of its decision points, also builds
the allocation its teacher (DRF's increments in DL2's action space) would
make in the same state; it prints how many jobs get the same number of
workers, and the remaining work of those DL2 gives more and fewer.

``--first-seed 100`` runs held-back seeds (100-199, which training
validates on) instead of the evaluation seeds: the way to choose between
checkpoints without looking at the seeds every figure is reported on.
Each paired difference is printed with its 95% confidence interval
(Student's t over the seeds), so a margin within the seeds' spread shows
as an interval that holds zero.

Every run is simulated afresh in this process (no cached run directories:
a new checkpoint always gives new figures).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

COMM = ["cluster.server_groups.0.nic_gbps=10", "cluster.server_groups.0.switches_per_socket=1",
        "cluster.server_groups.0.gpus_per_switch=4"]
MATCHES: dict[str, tuple[str, list[str], str, list[str]]] = {
    # name: (scenario, overrides, learned policy, baselines)
    "dl2": ("default", [], "dl2", ["drf", "drf+balance"]),
    "harmony": ("default", COMM, "harmony", []),  # baselines: the allocation with each --harmony-placements
}


def ci95(d: np.ndarray) -> float:
    """Half-width of the 95% t-interval of the mean of ``d`` (nan for one value)."""
    from hrlsched.experiments.compare import interval

    return interval(list(d))[1]


def avg_jct(scenario: str, overrides: list[str], policy: str, seed: int, checkpoint: str | None,
            allocation: str | None = None) -> float:
    """Average JCT (s) of one run; ``allocation``: Harmony's allocation
    policy instead of its checkpoint's (``policy`` harmony only)."""
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    extra = [f"checkpoint={checkpoint}"] if checkpoint else []
    cfg = resolve_run_config(scenario, policy, seed, [*overrides, *extra])
    if allocation is None:
        return float(summary(simulate(cfg), policy, scenario)["avg_jct_s"])
    from hrlsched.rivals.harmony import HarmonyScheduler
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    built = build_scenario(cfg.scenario, cfg.seed)  # as run.simulate, the scheduler built here
    sim = Simulator(built.topology, built.jobs, built.perf, HarmonyScheduler(checkpoint, allocation=allocation),
                    built.engine, seed=cfg.seed, predictor=built.predictor)
    return float(summary(sim.run(), policy, scenario)["avg_jct_s"])


def harmony_allocation(checkpoint: str | None) -> str:
    from hrlsched.agent.common.checkpoint import shipped_checkpoint
    from hrlsched.rivals.harmony import CHECKPOINTS

    return str(CHECKPOINTS.load(checkpoint or shipped_checkpoint(CHECKPOINTS.shipped))["config"]["allocation"])


def dl2_decisions(seed: int, checkpoint: str | None) -> None:
    from hrlsched.config import resolve_run_config
    from hrlsched.rivals import dl2
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    sched = dl2.DL2Scheduler(checkpoint)
    decide = sched.decide
    counts = {"same": 0, "more": 0, "fewer": 0}
    rem: dict[str, list[float]] = {"all": [], "more": [], "fewer": []}

    def allocations(view, choose) -> dict:  # type: ignore[no-untyped-def]
        pt = dl2.Point(view, sched.cfg, sched.cache, sched.profiles)
        while not pt.done:
            pt.act(choose(pt))
        return pt.allocations()

    def both(view):  # type: ignore[no-untyped-def]
        mine, drf = allocations(view, sched.choose), allocations(view, lambda pt: pt.drf_action())
        left = dict(zip(view.job_ids.tolist(), view.remaining.tolist()))
        for jid in set(mine) | set(drf):
            a = mine[jid].workers if jid in mine else 0
            b = drf[jid].workers if jid in drf else 0
            key = "same" if a == b else "more" if a > b else "fewer"
            counts[key] += 1
            rem["all"].append(left[jid])
            if key != "same":
                rem[key].append(left[jid])
        return decide(view)

    sched.decide = both  # type: ignore[method-assign]
    built = build_scenario(resolve_run_config("default", "dl2", seed).scenario, seed)
    Simulator(built.topology, built.jobs, built.perf, sched, built.engine, seed=seed, predictor=built.predictor).run()
    n = sum(counts.values())
    print(f"== dl2 against its teacher DRF on default seed {seed}, at dl2's {sched.points} decision points: "
          f"{n} job allocations")
    print(f"  the same workers: {counts['same']} ({counts['same'] / max(n, 1):.1%}); more than DRF: "
          f"{counts['more']}; fewer: {counts['fewer']}")
    print("  median remaining work (samples): "
          + ", ".join(f"{k} {np.median(v):,.0f}" for k, v in rem.items() if v))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="how many seeds: FIRST..FIRST+N-1")
    ap.add_argument("--first-seed", type=int, default=0, help="0: evaluation seeds; 100: held-back seeds")
    ap.add_argument("--dl2", help="DL2 checkpoint (default: the shipped one)")
    ap.add_argument("--harmony", help="Harmony checkpoint (default: the shipped one)")
    ap.add_argument("--only", choices=sorted(MATCHES), action="append")
    ap.add_argument("--harmony-allocation", choices=["fifo", "optimus"],
                    help="the workers and PSs of each job in the Harmony match (default: the checkpoint's)")
    ap.add_argument("--harmony-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario override added to comm in the Harmony match (repeatable)")
    ap.add_argument("--harmony-scenario", metavar="NAME",
                    help="the Harmony match's scenario instead of comm (built-in name or YAML, e.g. ps-small)")
    ap.add_argument("--harmony-placements", default="pack,topology,random", metavar="P1,P2,...",
                    help="the placements Harmony is compared with, under its allocation (default: pack,topology,random)")
    ap.add_argument("--dl2-decisions", type=int, metavar="SEED", help="DL2's choices against DRF's on this seed")
    args = ap.parse_args()
    if args.dl2_decisions is not None:
        dl2_decisions(args.dl2_decisions, args.dl2)
        return 0
    if args.seeds < 1:
        ap.error("--seeds: expected at least 1")
    if args.first_seed < 0:
        ap.error("--first-seed: expected a seed >= 0")
    from hrlsched.policies.registry import PLACEMENTS

    placements = [p.strip() for p in args.harmony_placements.split(",") if p.strip()]
    bad = [p for p in placements if p not in PLACEMENTS]
    if bad or not placements:
        ap.error(f"--harmony-placements: unknown placements {bad}; expected among {sorted(PLACEMENTS)}")
    for name in args.only or list(MATCHES):
        scen, overrides, learned, baselines = MATCHES[name]
        ck = getattr(args, name)
        alloc = None
        label = scen
        if name == "harmony":
            if args.harmony_scenario:
                scen = label = args.harmony_scenario
                overrides = []
            else:
                label = "comm"
            overrides = [*overrides, *args.harmony_set]
            alloc = args.harmony_allocation or harmony_allocation(ck)
            baselines = [f"{alloc}+{p}" for p in placements]
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        res = {p: np.array([avg_jct(scen, overrides, p, s, ck if p == learned else None,
                                    alloc if p == learned else None) for s in seeds]) / 3600
               for p in [learned, *baselines]}
        print(f"== {learned} on {label} ({' '.join([scen, *overrides])}): avg JCT in hours, seeds {seeds[0]}-{seeds[-1]}")
        print(f"{'seed':>4} " + " ".join(f"{p:>12}" for p in [learned, *baselines])
              + "".join(f" {learned + '/' + b:>20}" for b in baselines))
        for i, s in enumerate(seeds):
            print(f"{s:>4} " + " ".join(f"{res[p][i]:>12.3f}" for p in [learned, *baselines])
                  + "".join(f" {res[learned][i] / res[b][i]:>20.3f}" for b in baselines))
        print("mean " + " ".join(f"{res[p].mean():>12.3f}" for p in [learned, *baselines])
              + "".join(f" {res[learned].mean() / res[b].mean():>20.3f}" for b in baselines))
        for b in baselines:
            d = res[learned] - res[b]
            print(f"  {learned} vs {b}: {(res[learned].mean() / res[b].mean() - 1) * 100:+.1f}% mean avg JCT, "
                  f"better on {int((d < 0).sum())}/{args.seeds} seeds (paired difference {d.mean():+.3f} h "
                  f"+/- {ci95(d):.3f} (95%), min {d.min():+.3f}, max {d.max():+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
