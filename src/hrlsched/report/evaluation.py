"""The report of an evaluation directory (``hrlsched evaluate --out``):
evaluation.json's table (the agent, its ablations, the heuristics, the
rivals and the lower bound, paired by seed), a plot of it drawn here, the
rivals against their baselines, the agent's departures from its rules,
and the agent's config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrlsched.experiments.evaluate import ORACLE_LABELS
from hrlsched.report import page
from hrlsched.report.files import ReportError, plot_files, read_json, read_png, read_text
from hrlsched.report.page import Code, Head, Page

MARKERS = ("evaluation.json",)
H = 3600.0


def main_table(ev: dict[str, Any]) -> str:
    n = len(ev["seeds"])
    heads = [Head("row"), Head("kind"), Head("avg JCT (h)", "avg_jct_s", H, numeric=True),
             Head("agent − row (h)", "agent_minus_row_s", H, numeric=True),
             Head(f"agent faster (of {n} seeds)", "agent_wins", numeric=True), Head("information"),
             Head("best heuristic"), Head("unfinished jobs", "unfinished_jobs", numeric=True)]
    rows: list[list[page.Cell]] = []
    for r in ev["rows"]:
        own = r["kind"] in ("agent", "bound")
        rows.append([r["row"], r["kind"], page.num(r["avg_jct_s"], H, r["avg_jct_s_ci95"]),
                     page.num(r["agent_minus_row_s"], H, r["agent_minus_row_s_ci95"]),
                     page.Num(None, "-") if own else page.Num(r["agent_wins"], f"{r['agent_wins']}/{n}"),
                     ORACLE_LABELS.get(r["information"], "oracle") if r["oracle"] else r["information"],
                     "best" if r["best_heuristic"] else "", page.num(r["unfinished_jobs"])])
    caption = ("average JCT, mean ± 95% interval over the seeds; agent − row paired by seed "
               "(negative: the agent is faster)")
    return page.table(heads, rows, caption, table_id="main-table")


def rivals_table(rivals: list[dict[str, Any]]) -> str:
    heads = [Head("rival"), Head("baseline"), Head("rival avg JCT (h)", "rival_avg_jct_s", H, numeric=True),
             Head("baseline avg JCT (h)", "baseline_avg_jct_s", H, numeric=True),
             Head("rival − baseline (h)", "diff_s", H, numeric=True), Head("min (h)", "diff_min_s", H, numeric=True),
             Head("max (h)", "diff_max_s", H, numeric=True), Head("rival faster (seeds)", "rival_wins", numeric=True)]
    rows: list[list[page.Cell]] = [
        [x["rival"], x["baseline"], page.num(x["rival_avg_jct_s"], H), page.num(x["baseline_avg_jct_s"], H),
         page.num(x["diff_s"], H, x["diff_s_ci95"]), page.num(x["diff_min_s"], H), page.num(x["diff_max_s"], H),
         page.Num(x["rival_wins"], f"{x['rival_wins']}/{x['seeds']}")]
        for x in rivals]
    return page.table(heads, rows, "each rival against the baselines of its paper, paired by seed")


def departures_table(d: dict[str, Any]) -> str:
    rows: list[list[page.Cell]] = [[k, page.num(v)] for k, v in d["counts"].items()]
    return page.table([Head("level-1 choice"), Head("count", numeric=True)], rows,
                      f"the agent's {d['choices']} level-1 choices on seed {d['seed']} against its rules "
                      "(hrlsched explain for examples)")


def build(folder: Path) -> Page:
    from hrlsched.report.figures import jct_bars
    from hrlsched.seeds import seeds_text

    ev = read_json(folder / "evaluation.json")
    if not isinstance(ev, dict) or not isinstance(ev.get("rows"), list) or not ev.get("seeds"):
        raise ReportError(f"{folder / 'evaluation.json'}: expected hrlsched evaluate's output (an object with "
                          "rows and seeds)")
    scenario = str(ev.get("scenario", "?"))
    facts: list[tuple[str, str | Code]] = [("scenario", scenario), ("seeds", seeds_text(list(ev["seeds"])))]
    if ev.get("overrides"):
        facts.append(("overrides", Code(" ".join(f"--set {o}" for o in ev["overrides"]))))
    facts += [("checkpoint", Code(str(ev.get("checkpoint", "?")))),
              ("best heuristic", str(ev.get("best_heuristic", "?")))]
    if ev.get("hint"):
        facts.append(("the agent's hint", str(ev["hint"])))
    p = Page(f"Evaluation: {scenario}",
             "The agent (hrlsched evaluate) against its ablations, the heuristics and the lower bound, on the "
             "same seeds. An oracle is given the true remaining work, or reads a predictor without error.", facts)
    p.add("Table", main_table(ev))
    bars = {r["row"]: (r["avg_jct_s"] / H, r["avg_jct_s_ci95"] / H) for r in ev["rows"] if r["kind"] != "bound"}
    bound = [r["avg_jct_s"] / H for r in ev["rows"] if r["kind"] == "bound"]
    title = f"{scenario}: average JCT over seeds {seeds_text(list(ev['seeds']))}"
    figures = [page.figure(jct_bars(bars, title, bound[0] if bound else None), f"{title} (drawn for this report)")]
    figures += [page.figure(read_png(f), str(f.relative_to(folder))) for f in plot_files(folder)]
    p.add("Plots", page.plots(figures))
    if ev.get("rivals"):
        p.add("Rivals", rivals_table(ev["rivals"]))
    if ev.get("departures"):
        p.add("The agent's departures from its rules", departures_table(ev["departures"]))
    agent = folder / "runs" / "hrl" / f"seed{ev['seeds'][0]}" / "config.yaml"
    if agent.is_file():
        p.add("Config", page.para(f"runs/hrl/seed{ev['seeds'][0]}/config.yaml: the agent's run on the first seed; "
                                  "every row runs this scenario") + page.code(read_text(agent)))
    return p
