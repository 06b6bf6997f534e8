"""The headroom of a scenario: how far the rules (``optimus-tuned``, or
``optimus-tuned+P`` where the lookahead's ``place`` setting is P) and the
best heuristic are from ``lookahead`` (``agent.lookahead``), an oracle that
tries alternative decisions forward on copies of the simulation, by level:
level 1 alone (other menu slots, other policies' decisions), level 2 alone
(other placements of the rules' allocation), and both.

Each case is a scenario with optional overrides (``default@predictor.work_noise=0.7``).
Every run is kept under ``out/runs/<case>/<policy>/seed<N>.json`` with its
config, its average JCT, its wall time and, for the lookahead, what it did
(points evaluated, rollouts, choices changed by kind); a run already there
with the same config is reused (an interrupted batch resumes). The gains
are paired by seed: (rules - lookahead) / rules, and the same against the
best heuristic of the case (lowest mean over these seeds, chosen after the
fact), with 95% t-intervals."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MIN_POINTS = 10  # an alternative's line in the point-by-point table needs this many points
LEVEL_ROWS = {"1": ("level 1", "allocation"), "2": ("level 2", "placement"), "both": ("both", "both")}


@dataclass(frozen=True)
class Case:
    """A scenario with overrides and lookahead settings of its own, named
    ``SCENARIO[@key=value,key=value][#lookahead settings]`` (e.g.
    ``itp-c01#every=48``: a long trace evaluates fewer points)."""

    text: str
    scenario: str
    overrides: tuple[str, ...]
    lookahead: str = ""

    @classmethod
    def parse(cls, text: str) -> Case:
        from hrlsched.config import parse_case

        head, _, la = text.strip().partition("#")
        try:
            scen, over = parse_case(head)
        except ValueError:
            raise ValueError(f"--case {text!r}: expected SCENARIO[@key=value[,key=value]][#lookahead settings]") from None
        return cls(text.strip(), scen, over, la)

    @property
    def folder(self) -> str:
        return self.text.partition("#")[0].replace("/", "_").replace("@", "__").replace(",", "_").replace("=", "-")


def lookahead_policy(level: str, *settings: str) -> str:
    """The policy name of the lookahead at ``level`` with the other ``settings``
    (texts; a later one's key overrides an earlier one's)."""
    from hrlsched.agent.lookahead import LookaheadConfig

    kv: dict[str, str] = {}
    for text in settings:
        for p in LookaheadConfig.parts(text):
            key, _, val = p.partition("=")
            kv[key] = val
    kv["level"] = level
    cfg = LookaheadConfig.parse("/".join(f"{k}={v}" for k, v in kv.items()))
    return f"lookahead/{cfg.text()}" if cfg.text() else "lookahead"


def _path(out: Path, case: Case, policy: str, seed: int) -> Path:
    return out / "runs" / case.folder / policy.replace("/", "_").replace("+", "_") / f"seed{seed}.json"


def _run(case_text: str, policy: str, seed: int, path: str) -> dict[str, Any]:
    from hrlsched.config import dump_run_config, resolve_run_config
    from hrlsched.io import write_json
    from hrlsched.policies.registry import make_scheduler
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator
    from hrlsched.sim.metrics import summary

    case = Case.parse(case_text)
    cfg = resolve_run_config(case.scenario, policy, seed, list(case.overrides))
    t0 = time.perf_counter()
    built = build_scenario(cfg.scenario, seed)
    sched = make_scheduler(policy)
    sim = Simulator(built.topology, built.jobs, built.perf, sched, built.engine, seed=seed, predictor=built.predictor,
                    sample_jobs=built.sample_jobs)
    res = sim.run()
    wall = time.perf_counter() - t0
    s = summary(res, policy, case.text)
    stats = getattr(sched, "stats", None)
    rec = {"config": dump_run_config(cfg), "avg_jct_s": s["avg_jct_s"], "jobs_total": s["jobs_total"],
           "jobs_completed": s["jobs_completed"], "wall_s": wall,
           "lookahead": None if stats is None else {k: v for k, v in vars(stats).items()}}
    write_json(Path(path), rec)
    return rec


def _kept(path: Path, case: Case, policy: str, seed: int) -> dict[str, Any] | None:
    from hrlsched.config import dump_run_config, resolve_run_config

    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text())
    except ValueError:
        return None
    want = dump_run_config(resolve_run_config(case.scenario, policy, seed, list(case.overrides)))
    return rec if rec.get("config") == want else None


def headroom(
    cases: list[str],
    seeds: list[int],
    out: str | Path,
    lookahead: str = "",
    heuristics: list[str] | None = None,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    levels: tuple[str, ...] = ("1", "2"),
) -> list[dict[str, Any]]:
    """Run (or reuse) every case's heuristics and lookaheads on ``seeds``;
    write ``headroom.json`` in ``out`` and return one row per case."""
    from hrlsched.agent.lookahead import LookaheadConfig
    from hrlsched.agent.rules import rules_name
    from hrlsched.config import resolve_run_config
    from hrlsched.experiments.compare import check_unique
    from hrlsched.experiments.evaluate import HEURISTICS
    from hrlsched.io import write_json
    from hrlsched.outdir import check_writable
    from hrlsched.policies.registry import make_scheduler

    out = Path(out)
    parsed = [Case.parse(c) for c in cases]
    check_unique([c.text for c in parsed], "--case")
    if not seeds:
        raise ValueError("--seeds: expected at least one seed")
    rules = rules_name(LookaheadConfig.parse(lookahead).place)  # a bad setting fails before any run
    bad = [lv for lv in levels if lv not in LEVEL_ROWS]
    if bad or not levels:
        raise ValueError(f"--levels: expected some of {', '.join(LEVEL_ROWS)}, got {', '.join(levels) or 'none'}")
    heur = list(HEURISTICS if heuristics is None else heuristics)
    if rules not in heur:
        heur.insert(0, rules)
    check_unique(heur)
    for h in heur:
        make_scheduler(h)
    for c in parsed:
        resolve_run_config(c.scenario, None, None, list(c.overrides))  # a bad case fails first
    check_writable(out)
    las = {c.text: {LEVEL_ROWS[lv][0]: lookahead_policy(LEVEL_ROWS[lv][1], lookahead, c.lookahead) for lv in levels}
           for c in parsed}
    jobs = [(c, p, s) for c in parsed for p in [*heur, *las[c.text].values()] for s in seeds]
    results: dict[tuple[str, str, int], dict[str, Any]] = {}
    todo = []
    for c, p, s in jobs:
        rec = _kept(_path(out, c, p, s), c, p, s)
        if rec is None:
            todo.append((c, p, s))
        else:
            results[(c.text, p, s)] = rec
    if progress:
        progress(len(results), len(jobs))
    # the lookaheads last (the longest): the cheap runs' figures come first
    todo.sort(key=lambda t: t[1].startswith("lookahead"))
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = {pool.submit(_run, c.text, p, s, str(_path(out, c, p, s))): (c.text, p, s) for c, p, s in todo}
        for f in as_completed(futs):
            results[futs[f]] = f.result()
            if progress:
                progress(len(results), len(jobs))
    rows = [_case_row(c, seeds, rules, heur, las[c.text], results) for c in parsed]
    write_json(out / "headroom.json", {"cases": cases, "seeds": seeds, "lookahead": lookahead, "rules": rules,
                                       "heuristics": heur, "rows": rows})
    _write_points(out / "points.csv", [(c.text, name, p, s, results[(c.text, p, s)]) for c in parsed
                                       for name, p in las[c.text].items() for s in seeds])
    return rows


def _write_points(path: Path, runs: list[tuple[str, str, str, int, dict[str, Any]]]) -> None:
    """``points.csv``: one row per alternative tried at a point evaluated."""
    from hrlsched.agent.selector import POINT_FEATURES
    from hrlsched.io import write_text

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["case", "level", "seed", "time_s", "active_jobs", *POINT_FEATURES, "alternative", "gain_h"])
    for case, level, _, seed, rec in runs:
        for pt, kind, g, _ in _point_gains(rec):
            # a run kept from before a feature was added lacks it (features are only appended): blank
            blank = [""] * (len(POINT_FEATURES) - len(pt["features"]))
            w.writerow([case, level, seed, f"{pt['time_s']:.0f}", pt["jobs"], *(f"{x:.6g}" for x in pt["features"]),
                        *blank, kind, f"{g:.6g}"])
    write_text(path, buf.getvalue())


def _gain(ref: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Mean and 95% half-width of (ref - v) / ref over seeds, in %."""
    from hrlsched.stats import interval

    return interval(list(100.0 * (ref - v) / ref))


def _case_row(c: Case, seeds: list[int], rules_policy: str, heur: list[str], las: dict[str, str],
              results: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    def jct(p: str) -> np.ndarray:
        return np.array([results[(c.text, p, s)]["avg_jct_s"] for s in seeds], dtype=float)

    best = min(heur, key=lambda p: jct(p).mean())
    rules, top = jct(rules_policy), jct(best)
    row: dict[str, Any] = {"case": c.text, "seeds": seeds, "rules": rules_policy, "rules_avg_jct_s": float(rules.mean()),
                           "best_heuristic": best, "best_avg_jct_s": float(top.mean()),
                           "rules_wall_s": float(np.mean([results[(c.text, rules_policy, s)]["wall_s"] for s in seeds])),
                           "levels": {}}
    for name, p in las.items():
        v = jct(p)
        g, gh = _gain(rules, v)
        b, bh = _gain(top, v)
        recs = [results[(c.text, p, s)] for s in seeds]
        la = [r["lookahead"] or {} for r in recs]
        kinds: dict[str, int] = {}
        for x in la:
            for k, n in (x.get("by_kind") or {}).items():
                kinds[k] = kinds.get(k, 0) + int(n)
        row["levels"][name] = {
            "policy": p, "avg_jct_s": float(v.mean()), "gain_vs_rules_pct": g, "gain_vs_rules_pct_ci95": gh,
            "gain_vs_best_pct": b, "gain_vs_best_pct_ci95": bh, "wall_s": float(np.mean([r["wall_s"] for r in recs])),
            "points": int(sum(x.get("points", 0) for x in la)), "evaluated": int(sum(x.get("evaluated", 0) for x in la)),
            "rollouts": int(sum(x.get("rollouts", 0) for x in la)), "changed": int(sum(x.get("changed", 0) for x in la)),
            "decide_ms": 1000.0 * sum(x.get("seconds", 0.0) for x in la) / max(1, sum(x.get("points", 0) for x in la)),
            "changed_by_kind": kinds, "points_by_kind": _points_by_kind(recs),
            "one_step": _one_step(recs, float(rules.mean())),
        }
    return row


def _one_step(recs: list[dict[str, Any]], rules_jct_s: float) -> dict[str, Any] | None:
    """At the points of a lookahead run with ``observe=1`` and ``futures=k``
    (each a state of the rules' own run, each alternative's value on the real
    arrivals recorded beside its sampled-futures estimate): per episode, the
    gains over the rules' decision added over the points, in hours of average
    JCT and in % of the rules' average JCT, of the best alternative knowing
    the arrivals (``oracle``) and of the one chosen on the sampled futures,
    on the arrivals that came (``chosen``); and how often the chosen one was
    the best. None for other runs."""
    from hrlsched.agent.lookahead import beats

    oracle = chosen = 0.0
    n_pts = n_chose = n_right = 0
    for rec in recs:
        n = max(int(rec.get("jobs_total") or 0), 1)
        for pt in (rec.get("lookahead") or {}).get("records", []):
            if not pt.get("real"):
                continue
            n_pts += 1
            gains = (pt["base_real"] - np.array(pt["real"], dtype=float)) / n / 3600.0
            oracle += max(0.0, float(gains.max()))
            est = [v for _, v in pt["alternatives"]]
            i = int(np.argmin(est))
            if beats(est[i], pt["base"]):  # the lookahead's own rule
                chosen += float(gains[i])
                n_chose += 1
                n_right += int(gains[i] > 0)
    if not n_pts:
        return None
    e = max(len(recs), 1)
    pct = 100.0 * 3600.0 / rules_jct_s if rules_jct_s > 0 else float("nan")
    return {"points": n_pts, "oracle_h": oracle / e, "chosen_h": chosen / e, "oracle_pct": pct * oracle / e,
            "chosen_pct": pct * chosen / e, "chose": n_chose, "chose_better": n_right}


def _points_by_kind(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind of alternative, over the points where it was tried: how many,
    at how many it beat the base decision, its mean gain (hours of average
    JCT), and the Pearson correlation of its gain with each of the selector's
    features (``agent.selector``; None where either does not vary): whether
    what the selector reads tells where the alternative pays."""
    from hrlsched.agent.selector import POINT_FEATURES

    by: dict[str, list[tuple[list[float], float, int, list[float] | None]]] = {}
    for i, rec in enumerate(recs):
        for pt, kind, g, job in _point_gains(rec):
            by.setdefault(kind, []).append((pt["features"], g, i, job))
    out: dict[str, dict[str, Any]] = {}
    for kind, xs in by.items():
        # runs kept from before a feature was added lack it (features are only appended): the common ones
        n = min(len(x[0]) for x in xs)
        f = np.array([x[0][:n] for x in xs], dtype=float)
        g = np.array([x[1] for x in xs], dtype=float)
        ep = np.array([x[2] for x in xs])
        r: dict[str, float | None] = {}
        for i, name in enumerate(POINT_FEATURES):
            ok = i < n and f.shape[0] > 2 and f[:, i].std() > 0 and g.std() > 0
            r[name] = float(np.corrcoef(f[:, i], g)[0, 1]) if ok else None
        out[kind] = {"tried": len(xs), "better": int(np.count_nonzero(g > 0)), "mean_gain_h": float(g.mean()),
                     "r": r, **_learnable(f, g, ep, len(recs))}
        if all(x[3] is not None for x in xs):  # a forced alternative: the fit on its job's rows too
            fj = np.hstack([f, np.array([x[3] for x in xs], dtype=float)])
            job = _learnable(fj, g, ep, len(recs), standardize=True)
            out[kind]["job_linear_h"], out[kind]["job_linear_taken"] = job["linear_h"], job["linear_taken"]
    return out


def _point_gains(rec: dict[str, Any]) -> list[tuple[dict[str, Any], str, float, list[float] | None]]:
    """(point, alternative's kind, its gain over the base decision in hours of
    the episode's average JCT, what the agent's scorer read of its job) for
    each alternative tried at each evaluated point of a lookahead run's
    record (none for a record made before points were kept). What it read,
    for an alternative that forced one job's slot (``lookahead``'s
    ``jobs_read``): the cluster row, the rules' slot's candidate row and the
    forced slot's less it; None otherwise (and for records made before)."""
    out = []
    n = max(int(rec.get("jobs_total") or 0), 1)
    for pt in (rec.get("lookahead") or {}).get("records", []):
        read = pt.get("jobs_read") or [None] * len(pt["alternatives"])
        for (kind, v), job in zip(pt["alternatives"], read):
            x = None if job is None else [*job["cluster"], *job["rules"],
                                          *(a - b for a, b in zip(job["alt"], job["rules"]))]
            out.append((pt, str(kind), (pt["base"] - float(v)) / n / 3600.0, x))
    return out


RIDGE = 0.1  # the linear fit's ridge: features within [0, 1], gains of hundredths of an hour


def _learnable(f: np.ndarray, g: np.ndarray, episode: np.ndarray, n_episodes: int,
               standardize: bool = False) -> dict[str, Any]:
    """How much of an alternative's gains what the selector reads could
    take: ``oracle_h``, its gains summed over the points where it beats the
    base decision (what the lookahead, knowing the future, takes), and
    ``linear_h``, summed over the points where a linear fit of the gain on
    the point's features, fitted on the other episodes' points (leave one
    episode out), predicts a gain (a learner's share, decided on what it
    sees); both in hours of average JCT per episode (gains of separate
    points are added, which the runs they start need not do). None with a
    single episode. ``standardize``: each feature scaled to the training
    points' mean 0 and spread 1 first, and a bias added (features of unlike
    scales: the job's rows)."""
    if n_episodes < 2:
        return {"oracle_h": None, "linear_h": None, "linear_taken": None}
    take, gain = 0, 0.0
    for e in range(n_episodes):
        tr, te = episode != e, episode == e
        if not te.any() or not tr.any():
            continue
        a, b = f[tr], f[te]
        if standardize:
            mu, sd = a.mean(axis=0), a.std(axis=0)
            sd[sd == 0] = 1.0
            a, b = np.hstack([(a - mu) / sd, np.ones((len(a), 1))]), np.hstack([(b - mu) / sd, np.ones((len(b), 1))])
        w = np.linalg.solve(a.T @ a + RIDGE * np.eye(a.shape[1]), a.T @ g[tr])
        pick = b @ w > 0
        take += int(pick.sum())
        gain += float(g[te][pick].sum())
    return {"oracle_h": float(g[g > 0].sum()) / n_episodes, "linear_h": gain / n_episodes, "linear_taken": take}


def _pm(v: float, h: float) -> str:
    return f"{v:+.1f}%" + ("" if h != h else f" ± {h:.1f}")


def markdown(rows: list[dict[str, Any]], lookahead: str) -> str:
    """The headroom table (one line per case) and what the lookaheads changed."""
    from hrlsched.seeds import seeds_text

    seeds = rows[0]["seeds"] if rows else []
    names = list(rows[0]["levels"]) if rows else []
    rules = rows[0].get("rules", "optimus-tuned") if rows else "optimus-tuned"
    md = [f"Seeds {seeds_text(seeds)}; lookahead settings: `{lookahead or '(defaults)'}`, and a case's own after `#`; "
          f"the rules: `{rules}`. "
          "Gains are paired by seed, (reference − lookahead) / reference, mean ± 95% interval; positive: the "
          "lookahead is faster. Time: seconds per episode on this machine, the whole run.", "",
          "| case | rules (h) | best heuristic (h) | " + " | ".join(f"{n} vs rules" for n in names) + " | "
          + " | ".join(f"{n} vs best heuristic" for n in names) + " | s / episode: rules, "
          + ", ".join(names) + " |",
          "|---|---|---|" + "---|" * (2 * len(names)) + "---|"]
    for r in rows:
        lv = r["levels"]
        md.append(
            f"| `{r['case']}` | {r['rules_avg_jct_s'] / 3600:.3f} | {r['best_heuristic']} {r['best_avg_jct_s'] / 3600:.3f} | "
            + " | ".join(_pm(lv[n]["gain_vs_rules_pct"], lv[n]["gain_vs_rules_pct_ci95"]) for n in names) + " | "
            + " | ".join(_pm(lv[n]["gain_vs_best_pct"], lv[n]["gain_vs_best_pct_ci95"]) for n in names) + " | "
            + f"{r['rules_wall_s']:.1f}, " + ", ".join(f"{lv[n]['wall_s']:.0f}" for n in names) + " |")
    md += ["", "What the lookahead changed (all seeds): points evaluated, rollouts, its mean time per decision "
           "point (its latency, on this machine), and the alternatives it took over the rules' decision, by kind.", "",
           "| case | level | policy | points evaluated / all | rollouts | ms / decision | alternatives taken |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        for name, x in r["levels"].items():
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(x["changed_by_kind"].items(), key=lambda kv: -kv[1]))
            md.append(f"| `{r['case']}` | {name} | `{x['policy']}` | {x['evaluated']} / {x['points']} | {x['rollouts']} | "
                      f"{x['decide_ms']:.0f} | {x['changed']}: {kinds or '-'} |")
    one = [(r["case"], name, x["one_step"]) for r in rows for name, x in r["levels"].items() if x.get("one_step")]
    if one:
        md += ["", "Point by point along the rules' own run (`observe=1`: the lookahead follows the rules and only "
               "records; with `futures=k` it scores each alternative on k sampled futures and on the arrivals that "
               "came): per episode, the gains over the rules' decision added over the points, in % of the rules' "
               "average JCT, of the best alternative knowing the arrivals, and of the one chosen on the sampled "
               "futures (where one looked better), on the arrivals that came.", "",
               "| case | level | points | best, knowing the arrivals | chosen without them | points chosen (of them better) |",
               "|---|---|---|---|---|---|"]
        for case, name, o in one:
            md.append(f"| `{case}` | {name} | {o['points']} | {o['oracle_pct']:+.2f}% ({o['oracle_h']:+.4f} h) | "
                      f"{o['chosen_pct']:+.2f}% ({o['chosen_h']:+.4f} h) | {o['chose']} ({o['chose_better']}) |")
    pts = [(r["case"], name, k, v) for r in rows for name, x in r["levels"].items()
           for k, v in (x.get("points_by_kind") or {}).items() if v["tried"] >= MIN_POINTS]
    if pts:
        md += ["", "Point by point (`points.csv` beside `headroom.json`): each alternative tried at "
               f"{MIN_POINTS} or more points, the share of them where it beat the rules' decision, its mean gain "
               "there in hours of the episode's average JCT (positive: better), and the feature of the agent's "
               "point selector (`agent/selector.py`) whose value correlates most with that gain (Pearson r; "
               "few points make a noisy r). Then what of its gains the selector's features could take, in hours of "
               "average JCT per episode (point gains added): taken wherever it beats the rules (the lookahead, "
               "which knows the future), and taken where a linear fit of its gain on the features, fitted on the "
               f"other seeds' points (ridge {RIDGE:g}), predicts one (at how many points); for an alternative "
               "that forces one job's slot, the same fit on the point's features and what the agent's scorer "
               "reads of that job's choice (the cluster row, the rules' slot's candidate row, the forced slot's "
               "less it; each feature standardised), where the run recorded them.", "",
               "| case | level | alternative | points | better at | mean gain (h) | most correlated feature "
               "| where it pays (h / episode) | where a fit predicts it pays (h / episode, points) "
               "| the same, fit on the job's rows too |",
               "|---|---|---|---|---|---|---|---|---|---|"]
        for case, name, k, v in pts:
            rs = {f: x for f, x in v["r"].items() if x is not None}
            top = max(rs, key=lambda f: abs(rs[f])) if rs else None
            fit = ("-", "-") if v.get("linear_h") is None else (
                f"{v['oracle_h']:+.4f}", f"{v['linear_h']:+.4f} ({v['linear_taken']})")
            job = "-" if v.get("job_linear_h") is None else f"{v['job_linear_h']:+.4f} ({v['job_linear_taken']})"
            md.append(f"| `{case}` | {name} | {k} | {v['tried']} | {v['better'] / v['tried']:.0%} | "
                      f"{v['mean_gain_h']:+.4f} | " + (f"`{top}` r = {rs[top]:+.2f}" if top else "-")
                      + f" | {fit[0]} | {fit[1]} | {job} |")
    return "\n".join(md) + "\n"
