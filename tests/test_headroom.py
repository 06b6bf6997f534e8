"""``hrlsched headroom``: the rules and the best heuristic against the lookahead, per case and level."""

import json
from pathlib import Path

import numpy as np
import pytest

from hrlsched.experiments.headroom import Case, headroom, lookahead_policy, markdown


def test_cases_parse_and_bad_ones_are_refused() -> None:
    c = Case.parse("default@predictor.work_noise=0.7,workload.jobs=20#every=8")
    assert (c.scenario, c.overrides, c.lookahead) == ("default", ("predictor.work_noise=0.7", "workload.jobs=20"), "every=8")
    assert "#" not in c.folder and "@" not in c.folder
    for bad in ("", "default@", "default@x"):
        with pytest.raises(ValueError, match="--case"):
            Case.parse(bad)
    assert lookahead_policy("allocation", "every=4/level=both", "every=8") == "lookahead/level=allocation/every=8"


def test_headroom_runs_pairs_and_resumes(tmp_path: Path) -> None:
    case = "default@workload.jobs=14,workload.duration_h=0.7#every=2"
    rows = headroom([case], [0, 1], tmp_path, "policies=srtf+pack", ["fifo"], workers=1)
    (r,) = rows
    assert r["best_heuristic"] in ("fifo", "optimus-tuned") and set(r["levels"]) == {"level 1", "level 2"}
    for x in r["levels"].values():
        assert x["gain_vs_rules_pct"] >= -1e-9  # never worse than the rules it rolls out
        assert x["wall_s"] > 0 and x["points"] > 0
    saved = json.loads((tmp_path / "headroom.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(rows))
    md = markdown(rows, "policies=srtf+pack")
    assert "| case | rules (h)" in md and "level 1 vs rules" in md
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("seed*.json")}
    assert headroom([case], [0, 1], tmp_path, "policies=srtf+pack", ["fifo"], workers=1) == rows
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("seed*.json")} == before  # reused, not rerun
    with pytest.raises(ValueError, match="--levels"):
        headroom([case], [0], tmp_path, "", ["fifo"], levels=("3",))


def test_the_points_evaluated_are_kept_with_each_alternatives_gain(tmp_path: Path) -> None:
    """Each point the lookahead evaluates is kept with the selector's features
    and each alternative's job-seconds; ``points.csv`` gives every
    alternative's gain over the base decision, which is positive exactly
    where the lookahead took one (the best, strictly better)."""
    import csv

    from hrlsched.agent.selector import POINT_FEATURES

    case = "default@workload.jobs=14,workload.duration_h=0.7#every=2"
    (r,) = headroom([case], [0], tmp_path, "policies=srtf+pack:drf+pack", ["fifo"], workers=1, levels=("1",))
    x = r["levels"]["level 1"]
    rows = list(csv.DictReader((tmp_path / "points.csv").open()))
    assert rows and {k for k in rows[0]} >= {"case", "level", "seed", "alternative", "gain_h", *POINT_FEATURES}
    by_point: dict[str, list[float]] = {}
    for row in rows:
        by_point.setdefault(row["time_s"], []).append(float(row["gain_h"]))
    assert len(by_point) == x["evaluated"]
    assert sum(max(g) > 0 for g in by_point.values()) == x["changed"]
    kinds = x["points_by_kind"]
    assert sum(v["tried"] for v in kinds.values()) == len(rows)
    assert 0 < kinds["policy srtf+pack"]["tried"] <= x["evaluated"]  # (not tried where it is the base decision)
    md = markdown([r], "")
    if any(v["tried"] >= 10 for v in kinds.values()):
        assert "Point by point" in md and "most correlated feature" in md


def test_the_headroom_page_quotes_the_table_its_command_made() -> None:
    """docs/headroom.md's summary figures are those of the tables in
    docs/headroom/ (each written by the hrlsched headroom command named in its
    first line)."""
    import re

    docs = Path(__file__).resolve().parents[1] / "docs"
    lines: dict[str, list[str]] = {}
    for page in sorted((docs / "headroom").glob("*.md")):
        made = page.read_text()
        assert made.startswith("<!-- made by: hrlsched headroom ")
        for m in re.finditer(r"^\| `([^`]+)` \| [\d.]+ \|.*$", made, re.M):
            lines.setdefault(m.group(1), []).append(m.group(0))
    quoted = 0
    for row in re.finditer(r"^\| `([^`]+)`[^|]*\| (.*)$", (docs / "headroom.md").read_text().replace("**", ""), re.M):
        mine = [ln for c, ls in lines.items() if c == row.group(1) or c.startswith(row.group(1)) for ln in ls]
        if not mine:
            continue
        for fig in re.findall(r"[+-]\d+\.\d% ± \d+\.\d", row.group(2)):
            assert any(fig in ln for ln in mine), f"{row.group(1)}: {fig} is in no table of docs/headroom/"
            quoted += 1
    assert quoted >= 16


def test_the_rules_are_those_the_lookahead_improves_on(tmp_path: Path) -> None:
    """With ``place=migrate`` the lookahead rolls out with ``optimus-tuned+migrate``,
    so the headroom's rules (its reference and a heuristic of the table) are those."""
    case = "default@workload.jobs=10,workload.duration_h=0.5#every=3"
    (r,) = headroom([case], [0], tmp_path, "place=migrate/policies=srtf+pack", ["fifo"], workers=1, levels=("1",))
    assert r["rules"] == "optimus-tuned+migrate"
    saved = json.loads((tmp_path / "headroom.json").read_text())
    assert saved["rules"] == "optimus-tuned+migrate" and "optimus-tuned+migrate" in saved["heuristics"]
    assert "optimus-tuned" not in saved["heuristics"]
    assert r["levels"]["level 1"]["gain_vs_rules_pct"] >= -1e-9
    assert "the rules: `optimus-tuned+migrate`" in markdown([r], "place=migrate")


def test_what_a_linear_fit_of_the_features_could_take() -> None:
    """``_learnable``: where the gain follows a feature, a fit on the other
    episodes takes nearly all of it; where it never pays, nothing; one
    episode gives no figure."""
    from hrlsched.experiments.headroom import _learnable

    rng = np.random.default_rng(0)
    f = np.column_stack([np.ones(400), rng.uniform(size=400)])
    episode = np.repeat(np.arange(4), 100)
    g = 0.02 * (f[:, 1] - 0.5)
    x = _learnable(f, g, episode, 4)
    assert x["oracle_h"] == pytest.approx(g[g > 0].sum() / 4) and x["linear_h"] > 0.95 * x["oracle_h"]
    assert 180 < x["linear_taken"] < 220
    never = _learnable(f, np.full(400, -0.01), episode, 4)
    assert never["oracle_h"] == 0.0 and never["linear_h"] == 0.0 and never["linear_taken"] == 0
    assert _learnable(f[:100], g[:100], episode[:100], 1)["linear_h"] is None


def test_a_forced_alternatives_gain_that_follows_its_jobs_rows_is_found_by_the_job_fit() -> None:
    """``_points_by_kind``: where an alternative's gain follows a column of
    its job's rows (of a scale unlike the point's features) and not the
    point's features, the fit on the job's rows takes nearly all of it and
    the point fit does not; an alternative without rows gets no job fit.
    Runs kept from before the last feature was added (half of them here)
    are read on the features they have."""
    from hrlsched.agent.selector import POINT_FEATURES
    from hrlsched.experiments.headroom import _points_by_kind

    rng = np.random.default_rng(1)
    recs = []
    for e in range(4):
        nf = len(POINT_FEATURES) - (e % 2)
        pts = []
        for _ in range(60):
            rules = list(rng.uniform(size=14))
            alt = list(rules)
            alt[8] = rules[8] + 50.0 * rng.uniform(-1, 1)  # hours to finish, on a scale of its own
            gain_s = 3600.0 * 0.001 * (alt[8] - rules[8]) * 10  # job-seconds over 10 jobs: gain in hours
            pts.append({"time_s": 0.0, "jobs": 3, "features": list(rng.uniform(size=nf)), "base": 1e5,
                        "alternatives": [["workers x2", 1e5 - gain_s], ["policy drf+pack", 1e5 - 36.0]],
                        "jobs_read": [{"rules": rules, "alt": alt, "cluster": list(rng.uniform(size=9))}, None]})
        recs.append({"jobs_total": 10, "lookahead": {"records": pts}})
    by = _points_by_kind(recs)
    w = by["workers x2"]
    assert w["job_linear_h"] > 0.9 * w["oracle_h"] and w["linear_h"] < 0.8 * w["oracle_h"]
    assert "job_linear_h" not in by["policy drf+pack"]
    assert w["r"][POINT_FEATURES[-1]] is None and w["r"][POINT_FEATURES[1]] is not None


def test_observe_follows_the_rules_and_scores_the_choice_without_the_arrivals(tmp_path: Path) -> None:
    """``observe=1/futures=k``: the run is the rules' to the bit; at each point
    evaluated, the alternative chosen on sampled futures is scored on the
    arrivals that came, never above the best alternative knowing them."""
    case = "default@workload.jobs=12,workload.duration_h=0.5#every=2/observe=1/futures=2"
    (r,) = headroom([case], [0, 1], tmp_path, "policies=srtf+pack", ["fifo"], workers=1, levels=("1",))
    x = r["levels"]["level 1"]
    assert x["avg_jct_s"] == r["rules_avg_jct_s"] and x["changed"] == 0
    o = x["one_step"]
    assert o["points"] == x["evaluated"] > 0 and o["oracle_h"] >= max(o["chosen_h"], 0.0)
    assert 0 <= o["chose_better"] <= o["chose"] <= o["points"]
    assert "chosen without them" in markdown([r], "")
