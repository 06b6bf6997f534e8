"""The agent's hint alone under other options, on workloads the agent is not
evaluated on: ``optimus`` with the options of ``Optimus`` (remaining_weight,
keep_s, worker counts on the agent's menu) and ``pack`` placing, beside the
heuristics that lead on real traces (``srtf``; ``srtf-est``, the same rule on
users' estimates; ``drf``). A tool for choosing the hint's options across
workload families (the ``tune`` search runs on
``default``'s generator only); it reads training seeds (>= 1000) and, by
default, the Pollux workloads other than workload 6, which the quality
benchmark evaluates on.

    .venv/bin/python benchmarks/hint_options.py [--runs default:1000-1004 --runs pollux-w1:1000 ...]
        [--options a=1,h=3000,menu --options a=1.5,h=0 ...] [--agent [CHECKPOINT]]

Each option set is ``a=<remaining_weight>,h=<keep_s>,f=<keep_frac>[,menu][,first=remaining][,r=all|none|hint]
[,win=arrival|hint|hint-order][,re=<seconds>][,obs][,rem=fit|view]``;
``first=remaining`` gives the first workers shortest-remaining-first (``Optimus.first_order``);
``obs`` has the hint observe each job's loss once per round it ran (``Optimus.observe_rounds``);
``rem=view`` has it read each job's remaining steps from the predictor instead of its loss-curve fit
(``Optimus.remaining_from``);
``g`` (with ``--agent`` only) sets the network's hint-gap weight instead of the checkpoint's, ``b`` its
weight on the hint slot's score (``NetConfig.hint_bonus``) instead of the checkpoint's;
``menu`` limits the worker counts to the agent's menu
(``candidates.WORKER_OPTIONS``); ``r`` (with ``--agent`` only) says which
running jobs hold their room until their turn (``DecisionPoint``'s
``reserve_running``; default all); ``win`` (with ``--agent`` only) which
jobs a point decides, the first ``max_jobs`` in arrival order or in the hint's
(decided in arrival order, or with ``hint-order`` in the hint's; ``DecisionPoint``'s
``window``; default arrival); ``re`` (with ``--agent``
only) a decision point also that many seconds after the last
(``DecisionPoint``'s ``recheck_s``; default: events only). ``--agent`` runs, for each option set,
the agent (the shipped network, or CHECKPOINT's, with its hint-gap weight)
with its hint set so (``tune.with_weight``), instead of the hint alone.
Prints the mean average JCT (hours) per workload family and option set.
"""

from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ProcessPoolExecutor

import numpy as np

DEFAULT_RUNS = ["default:1000-1004"] + [f"pollux-w{w}:1000" for w in (1, 2, 3, 4, 5, 7, 8)]
DEFAULT_OPTIONS = ["a=1,h=3000,menu", "a=1,h=0,menu", "a=1.5,h=0", "a=1.5,h=3000,menu"]
REFERENCES = ["srtf", "srtf-est", "drf"]


def parse_runs(items: list[str]) -> list[tuple[str, int]]:
    out = []
    for item in items:
        scen, _, seeds = item.partition(":")
        lo, _, hi = (seeds or "1000").partition("-")
        for s in range(int(lo), int(hi or lo) + 1):
            if s < 1000:
                raise SystemExit(f"--runs {item}: seed {s} is an evaluation seed (0-999 reserved here); use >= 1000")
            out.append((scen, s))
    return out


def parse_options(text: str) -> dict:
    from hrlsched.envs.candidates import WORKER_OPTIONS
    from hrlsched.envs.hint import RESERVE_RUNNING as reserve
    from hrlsched.envs.hint import WINDOWS
    from hrlsched.policies.optimus import FIRST_ORDERS, REMAINING_FROM

    opts: dict = {"remaining_weight": 0.0, "keep_s": 0.0}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key == "a":
            opts["remaining_weight"] = float(value)
        elif key == "h":
            opts["keep_s"] = float(value)
        elif key == "f":
            opts["keep_frac"] = float(value)
        elif key == "g":
            opts["gap"] = float(value)
        elif key == "b":
            opts["bonus"] = float(value)
        elif key == "first" and value in FIRST_ORDERS:
            opts["first_order"] = value
        elif key == "menu" and not value:
            opts["worker_counts"] = list(WORKER_OPTIONS)
        elif key == "r" and value in reserve:
            opts["reserve_running"] = reserve[value]
        elif key == "win" and value in WINDOWS:
            opts["window"] = value
        elif key == "obs" and not value:
            opts["observe_rounds"] = True
        elif key == "rem" and value in REMAINING_FROM:
            opts["remaining_from"] = value
        elif key == "re" and value:
            opts["recheck_s"] = float(value)
        else:
            raise SystemExit(f"--options {text}: {part!r}: expected a=<number>, h=<seconds>, f=<share>, menu, "
                             "first=arrival|remaining, r=all|none|hint, win=arrival|hint|hint-order, "
                             "re=<seconds>, obs, rem=fit|view, g=<gap weight> or b=<hint bonus>")
    return opts


def agent_payload(path: str | None, opts: dict, out: str) -> str:
    """The agent of checkpoint ``path`` (default: the shipped one) with its
    hint set to ``opts``, written to ``out``."""
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common.checkpoint import save, shipped_checkpoint
    from hrlsched.agent.policy import SHIPPED
    from hrlsched.agent.tune import with_weight

    base = ckpt.load(path or shipped_checkpoint(SHIPPED))
    gap = opts.get("gap", float(base.get("hint_gap_weight", 0.0)))
    own = base["state_dict"].get("bonus") if base["net"]["net"].get("hint_bonus") else None
    bonus = opts.get("bonus", None if own is None else float(own))
    keys = ("keep_frac", "reserve_running", "first_order", "window", "recheck_s", "observe_rounds", "remaining_from")
    save(out, with_weight(base, gap, opts["remaining_weight"], opts["keep_s"], on_menu="worker_counts" in opts,
                          bonus=bonus, **{k: opts[k] for k in keys if k in opts}))
    return out


def agent_jct_h(scen: str, seed: int, path: str) -> float:
    import torch

    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    torch.set_num_threads(1)
    res = simulate(resolve_run_config(scen, "hrl", seed).model_copy(update={"checkpoint": path}))
    return float(np.mean(res.finish_s - np.array([j.arrival_s for j in res.jobs]))) / 3600


def avg_jct_h(scen: str, seed: int, policy: str, opts: dict | None) -> float:
    from hrlsched.config import resolve_run_config
    from hrlsched.policies.base import ComposedScheduler
    from hrlsched.policies.optimus import Optimus
    from hrlsched.policies.registry import PLACEMENTS
    from hrlsched.run import simulate
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    if opts is None:
        res = simulate(resolve_run_config(scen, policy, seed))
    else:
        b = build_scenario(resolve_run_config(scen, None, None).scenario, seed)
        sched = ComposedScheduler(Optimus(**opts), PLACEMENTS["pack"].factory())
        res = Simulator(b.topology, b.jobs, b.perf, sched, b.engine, seed=seed, predictor=b.predictor).run()
    return float(np.mean(res.finish_s - np.array([j.arrival_s for j in res.jobs]))) / 3600


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", action="append", help="SCENARIO:SEEDS (e.g. default:1000-1004; repeatable)")
    ap.add_argument("--options", action="append", help="an option set, e.g. a=1,h=3000,menu (repeatable)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--references", default=",".join(REFERENCES),
                    help="the heuristics run beside, comma-separated ('' for none)")
    ap.add_argument("--agent", nargs="?", const="", default=None, metavar="CHECKPOINT",
                    help="run the agent (default: the shipped one) with each hint option set")
    args = ap.parse_args()
    runs = parse_runs(args.runs or DEFAULT_RUNS)
    refs = [r for r in args.references.split(",") if r]
    rows = [(r, None) for r in refs] + [(o, parse_options(o)) for o in (args.options or DEFAULT_OPTIONS)]
    if args.agent is None and any(k in opts for k in ("reserve_running", "window", "recheck_s", "gap", "bonus")
                                  for _, opts in rows if opts):
        raise SystemExit("--options r=..., win=..., re=..., g=... or b=...: the reservation of running jobs, the "
                         "window of decided jobs, the agent's extra decision points, its hint-gap weight and hint "
                         "bonus are the agent's (use --agent)")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: agent_payload(args.agent or None, opts, f"{tmp}/{i}.pt")
                 for i, (name, opts) in enumerate(rows) if opts is not None and args.agent is not None}
        jobs = [(s, seed, name, opts) for name, opts in rows for s, seed in runs]
        with ProcessPoolExecutor(args.workers) as ex:
            futs = [ex.submit(agent_jct_h, s, seed, paths[name]) if name in paths else
                    ex.submit(avg_jct_h, s, seed, name, opts) for s, seed, name, opts in jobs]
            got = [f.result() for f in futs]
    families = list(dict.fromkeys("pollux" if s.startswith("pollux") else s for s, _ in runs))
    table: dict[str, dict[str, list[float]]] = {name: {f: [] for f in families} for name, _ in rows}
    for (s, _, name, _), v in zip(jobs, got):
        table[name]["pollux" if s.startswith("pollux") else s].append(v)
    print("mean avg JCT (h) over " + ", ".join(f"{s}:{seed}" for s, seed in runs))
    what = "the agent with its hint set so" if args.agent is not None else "hint options (optimus + pack)"
    print(f"| {what} | " + " | ".join(families) + " |")
    print("|---" * (len(families) + 1) + "|")
    for name, _ in rows:
        label = name if name in refs else ("hrl, hint " if args.agent is not None else "") + f"optimus({name})"
        print(f"| {label} | " + " | ".join(f"{np.mean(table[name][f]):.3f}" for f in families) + " |")


if __name__ == "__main__":
    main()
