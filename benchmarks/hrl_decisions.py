"""Where the agent departs from the heuristic it sees: for each level-1
choice of a greedy episode, the agent's slot against the slot of its hint
(``optimus``, mapped to the candidate menu), counted by kind: the same
slot; *keep* (the running job keeps its allocation, no restart) where the
hint changes it; more or fewer workers than the hint; *wait* where the hint
runs the job; the hint's architecture or mode changed. Then how often the
hint's slot itself falls short of the heuristic's worker count (the menu
rounds it down, or the mask forbids it). ``--list`` prints each departure:
simulated time, job, the heuristic's workers, the hint's slot, the agent's
choice and the GPUs free at that point.

    .venv/bin/python benchmarks/hrl_decisions.py [--checkpoint PATH] [--scenario default] [--seed 0] [--list]
        [--follow-hint] [--reserve all|none|hint]

``--follow-hint`` plays the hint's slot at every choice instead of the
agent's (the hint as the agent's environment runs it); ``--reserve``
overrides which running jobs hold their room until their turn
(``DecisionPoint``'s ``reserve_running``; default: the checkpoint's).

Needs a level-1 checkpoint trained with a hint (the shipped one is).
"""

from __future__ import annotations

import argparse
import collections
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default=None, help="agent checkpoint (default: the shipped one)")
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (0-99: evaluation seeds)")
    ap.add_argument("--list", action="store_true", help="print every departure from the hint")
    ap.add_argument("--follow-hint", action="store_true", help="take the hint's slot at every choice")
    ap.add_argument("--reserve", choices=["all", "none", "hint"], help="which running jobs hold their room")
    args = ap.parse_args()
    import numpy as np
    import torch

    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common.checkpoint import shipped_checkpoint
    from hrlsched.agent.common.distributions import MaskedCategorical
    from hrlsched.agent.policy import SHIPPED
    from hrlsched.agent.rollout import make_env, to_tensors
    from hrlsched.envs import features as F
    from hrlsched.envs.candidates import KEEP, WAIT

    torch.set_num_threads(1)
    ck = ckpt.load(args.checkpoint or shipped_checkpoint(SHIPPED))
    if ck["part"] != "allocate" or "hint" not in ck["env_kwargs"]:
        print("this checkpoint does not decide level 1 with a hint: nothing to compare")
        return 2
    net = ckpt.build_net(ck)
    kw = {**ck["env_kwargs"], "scenario": args.scenario, "overrides": []}  # the scenario as evaluated, not trained
    if args.reserve:
        from hrlsched.envs.decision import RESERVE_RUNNING

        kw["reserve_running"] = RESERVE_RUNNING[args.reserve]
    env = make_env("allocate", args.seed, kw)
    obs, _ = env.reset(seed=0)
    t = env.dp.table
    hint_col = F.CANDIDATE_FEATURES.index("is_hint")
    counts: collections.Counter[str] = collections.Counter()
    hint_w = F.JOB_FEATURES.index("hint_workers")
    short = [0, 0]  # choices whose hint slot has fewer workers than the heuristic gave; workers missing
    while True:
        with torch.inference_mode():
            logits, _ = net(to_tensors(obs), part="allocate")
            a = int(MaskedCategorical(logits, torch.as_tensor(obs["action_mask"]).bool().unsqueeze(0)).greedy())
        h = int(np.argmax(obs["candidates"][:, hint_col]))
        if args.follow_hint:
            a = h
        if a == h:
            kind = "same as the hint"
        elif a == KEEP:
            kind = "keep where the hint changes the job"
        elif a == WAIT:
            kind = "wait where the hint runs the job"
        elif h in (WAIT, KEEP):
            kind = "start or change a job the hint leaves as it is" if h == KEEP else "run a job the hint holds back"
        elif (t.arch[a], t.mode[a]) != (t.arch[h], t.mode[h]):
            kind = "another architecture or mode"
        elif t.workers[a] > t.workers[h]:
            kind = "more workers"
        elif t.workers[a] < t.workers[h]:
            kind = "fewer workers"
        else:
            kind = "another PS count"
        counts[kind] += 1
        # the heuristic's own worker count against the menu slot that stands for it (rounded or masked)
        k = int(np.flatnonzero(obs["current_job"])[0])
        raw = int(round(obs["jobs"][k, hint_w] * F.WORKER_SCALE))
        slot_w = int(t.workers[h]) if h > KEEP else (raw if h == KEEP else 0)
        if args.list and a != h:
            view = env._view
            name = lambda c: ("wait", "keep")[c] if c <= KEEP else f"{t.workers[c]} workers"  # noqa: E731
            print(f"  t={view.time_s / 3600:7.2f} h  job {view.jobs[k].job_id:>5}  heuristic {raw:>3} workers  "
                  f"hint slot {name(h):<11}  agent {name(a):<11}  free GPUs {np.count_nonzero(view.gpu_tasks == 0)}"
                  f"  ({kind})")
        if slot_w < raw:
            short[0] += 1
            short[1] += raw - slot_w
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            break
    n = sum(counts.values())
    who = "the hint's slot at every choice" if args.follow_hint else "the agent"
    print(f"{args.scenario} seed {args.seed}, {who}, running jobs' rooms held: {kw.get('reserve_running', True)}: "
          f"{n} level-1 choices; average JCT {info['job_seconds'] / len(env._sim.jobs) / 3600:.3f} h")
    for kind, c in counts.most_common():
        print(f"  {kind:<48} {c:>6}  {100 * c / n:5.1f}%")
    print(f"  the hint's slot has fewer workers than the heuristic gave (menu rounding, or the mask) at "
          f"{short[0]} choices ({100 * short[0] / max(n, 1):.1f}%), {short[1]} workers in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
