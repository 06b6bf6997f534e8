"""Whether the learned placement's cap per decision point changes a decision.

A learned placement choice (``agent/placement_choice.py``) chooses for at most
``PRICED_PER_POINT`` jobs per decision point; the others there take pack's
placement unpriced (it bounds the latency of a point that places hundreds of
jobs anew, ``benchmarks/hrl_latency.py``). This runs the agent with the cap
lifted on each case and counts, per point, the jobs placed anew and those its
choice places elsewhere than pack, by their rank at the point. No departure
beyond the cap's rank means the capped agent makes every decision the
uncapped one makes on those cases, to the bit.

    .venv/bin/python benchmarks/placement_cap.py --checkpoint hrl-hetero hetero:0-19 comm:0-19:predictor.work_noise=0.7

A case is ``SCENARIO:SEEDS[:KEY=VALUE,...]`` (seeds ``a-b``). Not among
``make bench``: minutes per case.
"""

from __future__ import annotations

import argparse
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default="hrl-hetero", help="an agent with a learned placement (file or shipped name)")
    ap.add_argument("cases", nargs="+", help="SCENARIO:SEEDS[:KEY=VALUE,...], e.g. hetero:0-19")
    args = ap.parse_args()
    from hrlsched.agent.placement_choice import PRICED_PER_POINT
    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    cap = PRICED_PER_POINT
    print(f"{args.checkpoint}, its placement choice uncapped; cap {cap} jobs per point")
    print("| case | seeds | points placing anew | largest at a point | points over the cap | departures from pack | "
          "of them beyond the cap |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases:
        scenario, seeds, *rest = case.split(":")
        a, _, b = seeds.partition("-")
        sets = rest[0].split(",") if rest else []
        points, largest, over, departed, beyond = 0, 0, 0, 0, 0
        for seed in range(int(a), int(b or a) + 1):
            pol = HRLScheduler(args.checkpoint)
            pc = pol.placement
            if pc is None:
                raise SystemExit(f"{args.checkpoint}: no learned placement choice")
            pc.priced_per_point = 10**9
            per: dict[tuple[int, int], list[bool]] = defaultdict(list)
            choose = pc.choose

            def counted(dp, job, pl, pc=pc, choose=choose, per=per):  # noqa: ANN001, ANN202
                d = pc.departed
                out = choose(dp, job, pl)
                per[(id(dp.view), dp.decisions)].append(pc.departed > d)
                return out

            pc.choose = counted  # type: ignore[method-assign]
            simulate(resolve_run_config(scenario, "hrl", seed, sets), scheduler=pol)
            points += len(per)
            departed += pc.departed
            for v in per.values():
                largest = max(largest, len(v))
                over += len(v) > cap
                beyond += sum(v[cap:])
        print(f"| `{scenario}`{' ' + ' '.join(sets) if sets else ''} | {seeds} | {points} | {largest} | {over} | "
              f"{departed} | {beyond} |", flush=True)


if __name__ == "__main__":
    main()
