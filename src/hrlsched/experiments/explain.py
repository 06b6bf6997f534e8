"""Where the agent departs from its rules: at each level-1 choice of a
greedy run, the slot the agent takes against the slot its rules take in
the same state (the rules: the same checkpoint with its learned scorer
silenced, ``experiments.ablation.rules_only``), counted by kind: the same
slot; *keep* (the running job keeps its allocation, no restart) where the
rules change it; *wait* where the rules run the job; more or fewer workers,
another architecture or mode, or both; another PS count alone. Also how often the rules
themselves leave the hint's slot (their speed-gap weight at the hint's
worker count), and how often the agent takes it.

The run is the ``hrl`` policy's own (``run.simulate``; the same episode as
``hrlsched simulate --policy hrl``): its scorer is wrapped so that each
choice is scored by the agent and by its rules, and the agent's slot is
played (``play="rules"`` or ``"hint"``: theirs instead).

``explain_dl2``: the same question for DL2 (rebuilt from its paper), whose
rules are its teacher's, DRF's; and what leaves GPUs idle under it (its
window of job slots, its network's stops), as docs/rivals-offcluster.md
reads it off other clusters."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.agent.selector import SELECTOR_POLICIES
from hrlsched.contract import ARCHS, MODES

HOUR = 3600.0
PLAYERS = ("agent", "rules", "hint")
SAME = "same as the rules"


class _Watcher:
    """A ``CandidateScorer`` that scores each choice with the agent's,
    the rules' and the hint's scorers, counts how the agent's slot differs
    from the rules', and returns the scores of the one played."""

    silent = False  # (its scorers read the point's encoding: it is made)

    def __init__(self, sched: Any, scorers: dict[str, Any], play: str, examples: int | None) -> None:
        self.sched, self.scorers, self.play = sched, scorers, play
        self.counts: collections.Counter[str] = collections.Counter()
        self.rules_not_hint = 0
        self.agent_is_hint = 0
        self.examples: list[dict[str, Any]] = []
        self.keep = examples  # None: every departure

    @property
    def residual(self) -> Any:  # the agent's: the policy sets ``arrived`` where it reads it
        return self.scorers["agent"].residual

    @property
    def arrived(self) -> float:
        return float(self.scorers["agent"].arrived)

    @arrived.setter
    def arrived(self, value: float) -> None:
        for s in self.scorers.values():
            s.arrived = value

    def point(self, hj: np.ndarray, pooled: np.ndarray) -> None:
        for s in self.scorers.values():  # the networks share the encoder: one encoding serves all
            s.point(hj, pooled)

    def score(self, k: int, cluster: np.ndarray, context: np.ndarray, base: np.ndarray, dyn: np.ndarray,
              ix: np.ndarray) -> np.ndarray:
        scores = {name: s.score(k, cluster, context, base, dyn, ix) for name, s in self.scorers.items()}
        a, r = int(ix[scores["agent"].argmax()]), int(ix[scores["rules"].argmax()])
        table = self.sched.dp.table
        kind = departure(table, a, r)
        self.counts[kind] += 1
        hr = int(dyn[:, 4].argmax())  # the hint's row (``DYN_COLUMNS``' last: is_hint)
        if dyn[hr, 4] > 0:
            h = int(ix[hr])
            self.rules_not_hint += departure(table, r, h) != SAME
            self.agent_is_hint += departure(table, a, h) == SAME
        if kind != SAME and (self.keep is None or len(self.examples) < self.keep):
            view = self.sched.dp.view
            self.examples.append({
                "time_h": round(view.time_s / 3600, 3), "job": int(view.jobs[k].job_id), "rules": slot_name(table, r),
                "agent": slot_name(table, a), "free_gpus": int(np.count_nonzero(view.gpu_tasks == 0)), "kind": kind,
            })
        return scores[self.play]


def departure(t: Any, a: int, r: int) -> str:
    """The kind of departure of slot ``a`` from slot ``r`` (candidate table ``t``)."""
    from hrlsched.envs.candidates import KEEP, WAIT

    if a == r or (a > KEEP and r > KEEP and (t.workers[a], t.ps[a], t.arch[a], t.mode[a])
                  == (t.workers[r], t.ps[r], t.arch[r], t.mode[r])):
        return SAME
    if a == KEEP:
        return "keep where the rules change the job"
    if a == WAIT:
        return "wait where the rules run the job"
    if r == WAIT:
        return "run a job the rules hold back"
    if r == KEEP:
        return "start or change a job the rules leave as it is"
    kinds = []
    if t.workers[a] != t.workers[r]:
        kinds.append("more workers" if t.workers[a] > t.workers[r] else "fewer workers")
    if (t.arch[a], t.mode[a]) != (t.arch[r], t.mode[r]):
        kinds.append("another architecture or mode")
    return ", ".join(kinds) or "another PS count"


def slot_name(t: Any, c: int) -> str:
    from hrlsched.envs.candidates import KEEP

    if c <= KEEP:
        return ("wait", "keep")[c]
    ps = f"+{t.ps[c]}ps" if t.ps[c] else ""
    return f"{t.workers[c]}w{ps} {ARCHS[t.arch[c]]}/{MODES[t.mode[c]]}"


def explain(scenario: str, seed: int, checkpoint: str | Path | None = None, overrides: list[str] | None = None,
            play: str = "agent", reserve: str | None = None, examples: int | None = 5) -> dict[str, Any]:
    """The agent's departures from its rules on one run (see the module's
    docstring): ``choices``, ``counts`` by kind (most common first),
    ``rules_not_hint`` and ``agent_is_hint`` (choices where the rules' slot
    is not the hint's, where the agent's is), ``examples`` (the first ``examples`` departures;
    None: all), ``avg_jct_s`` of the run played. ``reserve``: which running
    jobs hold their room until their turn (all, none, hint; default the
    checkpoint's)."""
    from hrlsched.config import resolve_run_config
    from hrlsched.experiments import learned
    from hrlsched.experiments.ablation import hint_alone, rules_only
    from hrlsched.policies.hint import RESERVE_RUNNING
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    if play not in PLAYERS:
        raise ValueError(f"--play {play!r}: expected one of {', '.join(PLAYERS)}")
    if reserve is not None and reserve not in RESERVE_RUNNING:
        raise ValueError(f"--reserve {reserve!r}: expected one of {', '.join(RESERVE_RUNNING)}")
    path = learned.checkpoint_path(checkpoint) if checkpoint is not None else learned.shipped_checkpoint()
    cfg = resolve_run_config(scenario, "hrl", seed, [*(overrides or []), f"checkpoint={path.resolve()}"])
    sched = learned.HRLScheduler(path)
    if not (sched.part == "allocate" and sched.net.static):
        raise ValueError(f"{path}: explain reads level-1 choices of a network that encodes a decision point once "
                         "(part 'allocate', static_point), as the shipped checkpoint; this one is part "
                         f"{sched.part!r}")
    if reserve is not None:
        sched.hint = dataclasses.replace(sched.hint, reserve_running=RESERVE_RUNNING[reserve])
    nets = {"agent": sched.net, "rules": learned.build_net(rules_only(sched.ck, str(path))),
            "hint": learned.build_net(hint_alone(sched.ck, str(path)))}
    watcher = _Watcher(sched, {k: learned.CandidateScorer(n, sched.residual if k == "agent" else None)
                               for k, n in nets.items()}, play, examples)
    learned.score_with(sched, watcher)
    res = simulate(cfg, scheduler=sched)
    n = sum(watcher.counts.values())
    return {
        "scenario": cfg.scenario.name, "seed": seed, "checkpoint": str(path), "played": play,
        "reserve_running": sched.hint.reserve_running, "choices": n,
        "counts": dict(watcher.counts.most_common()), "rules_not_hint": watcher.rules_not_hint,
        "agent_is_hint": watcher.agent_is_hint,
        "examples": watcher.examples, "avg_jct_s": float(summary(res, "hrl", cfg.scenario.name)["avg_jct_s"]),
        # the learned point selector (agent.selector): the points where another heuristic's whole decision was taken
        "selector": None if sched.selector is None else {
            "points": sched.selector.points,
            "taken": {p: int(n) for p, n in zip(SELECTOR_POLICIES, sched.selector.taken.tolist())}},
        # the learned placement choice (agent.placement_choice): jobs placed anew, and those placed elsewhere than pack
        "placement": None if sched.placement is None else {
            "placed": sched.placement.choices, "departed": sched.placement.departed},
    }


def placement_departures(p: dict[str, int]) -> str:
    """The learned placement's departures (``explain``'s ``placement``), in words."""
    return (f"the learned placement places {p['departed']} of the {p['placed']} jobs placed anew elsewhere than pack "
            f"would ({100 * p['departed'] / max(p['placed'], 1):.1f}%)")


def format_departures(d: dict[str, Any]) -> str:
    n = max(d["choices"], 1)
    who = {"agent": "the agent", "rules": "its rules", "hint": "the hint"}[d["played"]]
    departed = d["choices"] - d["counts"].get(SAME, 0)
    lines = [f"{d['scenario']} seed {d['seed']}, {who} played, running jobs' rooms held: {d['reserve_running']}: "
             f"{d['choices']} level-1 choices, the agent departs from its rules at {departed} "
             f"({100 * departed / n:.1f}%); average JCT {d['avg_jct_s'] / 3600:.3f} h"]
    for kind, c in d["counts"].items():
        lines.append(f"  {kind:<48} {c:>6}  {100 * c / n:5.1f}%")
    lines.append(f"  the rules leave the hint's slot (another architecture, mode or PS count at its worker count) "
                 f"at {d['rules_not_hint']} choices ({100 * d['rules_not_hint'] / n:.1f}%); the agent takes the "
                 f"hint's slot at {d['agent_is_hint']} ({100 * d['agent_is_hint'] / n:.1f}%)")
    if d.get("selector"):
        sel = d["selector"]
        taken = ", ".join(f"{p} at {n}" for p, n in sel["taken"].items())
        lines.append(f"  the point selector takes another heuristic's whole decision at "
                     f"{sum(sel['taken'].values())} of {sel['points']} decision points: {taken}")
    if d.get("placement"):
        lines.append(f"  {placement_departures(d['placement'])}")
    if d["examples"]:
        lines.append("  departures" + (":" if len(d["examples"]) == departed else f" (the first {len(d['examples'])}):"))
        for e in d["examples"]:
            lines.append(f"    t={e['time_h']:7.2f} h  job {e['job']:>5}  rules {e['rules']:<22} agent {e['agent']:<22} "
                         f"free GPUs {e['free_gpus']:>3}  ({e['kind']})")
    return "\n".join(lines)


def explain_dl2(scenario: str, seed: int, checkpoint: str | Path | None = None,
                overrides: list[str] | None = None, window: int | None = None) -> dict[str, Any]:
    """DL2 against its teacher DRF: at each of DL2's decision points of a
    greedy run, the allocation its network builds and the one DRF's
    increments in its action space would build in the same state; per job
    allocation, whether DL2 gives as many workers, more or fewer, and the
    median remaining work (samples) of each. Also what leaves GPUs idle
    under DL2: the points with more active jobs than its window (``window``
    job slots; None: the checkpoint's) and the job-hours spent outside it,
    and the points where its network stopped while a window job below its
    request could still grow, with the GPU-hours left idle until the next
    point; the allocations its placement could not put on the servers;
    and the run's average JCT."""
    from hrlsched.config import resolve_run_config
    from hrlsched.experiments import learned
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    cfg = resolve_run_config(scenario, "dl2", seed, overrides or [])
    sched, both = learned.dl2_against_drf(checkpoint, window)
    J = sched.cfg.window
    decide = sched.decide
    counts = {"same": 0, "more": 0, "fewer": 0}
    rem: dict[str, list[float]] = {"all": [], "more": [], "fewer": []}
    at: list[tuple[float, int, int, bool]] = []  # per point: time, jobs outside the window, idle GPUs, held back

    def watched(view: Any) -> Any:
        pt, drf = both(view)
        mine = pt.allocations()
        left = dict(zip(view.job_ids.tolist(), view.remaining.tolist()))
        for jid in set(mine) | set(drf):
            a = mine[jid].workers if jid in mine else 0
            b = drf[jid].workers if jid in drf else 0
            key = "same" if a == b else "more" if a > b else "fewer"
            counts[key] += 1
            rem["all"].append(left[jid])
            if key != "same":
                rem[key].append(left[jid])
        d = decide(view)
        idle = view.topology.n_gpus - sum(len(pl.gpus) for pl in d.placements.values())
        at.append((view.time_s, max(len(view.jobs) - J, 0), idle, bool(pt.held_back().any())))
        return d

    sched.decide = watched
    res = simulate(cfg, scheduler=sched)
    t, out, idle, held = (np.array(c) for c in zip(*at))
    dt = np.diff(np.append(t, res.end_time_s))  # until the next point (the last: until the run ends)
    return {"scenario": cfg.scenario.name, "seed": seed, "points": int(sched.points), "counts": counts,
            "median_remaining": {k: float(np.median(v)) for k, v in rem.items() if v},
            "window": J, "points_window_full": int((out > 0).sum()),
            "job_hours_outside_window": float((out * dt).sum() / HOUR),
            "points_held_back": int(held.sum()), "gpu_hours_idle_held_back": float((idle * dt)[held].sum() / HOUR),
            "gpu_hours_idle": float((idle * dt).sum() / HOUR), "unplaced": int(sched.unplaced),
            "avg_jct_h": float(summary(res, "dl2", cfg.scenario.name)["avg_jct_s"]) / HOUR}  # type: ignore[arg-type]


def format_dl2(d: dict[str, Any]) -> str:
    c = d["counts"]
    n = sum(c.values())
    return "\n".join([
        f"== dl2 against its teacher DRF on {d['scenario']} seed {d['seed']}, at dl2's {d['points']} decision points: "
        f"{n} job allocations",
        f"  the same workers: {c['same']} ({c['same'] / max(n, 1):.1%}); more than DRF: {c['more']}; fewer: {c['fewer']}",
        "  median remaining work (samples): " + ", ".join(f"{k} {v:,.0f}" for k, v in d["median_remaining"].items()),
        f"  window of {d['window']} jobs: more active jobs than that at {d['points_window_full']} points; "
        f"{d['job_hours_outside_window']:,.1f} job-hours outside it (in the backlog, no GPU)",
        f"  stopped while a window job below its request could grow: {d['points_held_back']} points; "
        f"{d['gpu_hours_idle_held_back']:,.1f} GPU-hours idle until the next point "
        f"(idle in all: {d['gpu_hours_idle']:,.1f})",
        f"  allocations its placement could not put on the servers (the job waits): {d['unplaced']}",
        f"  average JCT of this run: {d['avg_jct_h']:.3f} h",
    ])
