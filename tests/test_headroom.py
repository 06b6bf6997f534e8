"""``hrlsched headroom``: the rules and the best heuristic against the lookahead, per case and level."""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from hrlsched.experiments.headroom import Case, headroom, lookahead_policy, markdown  # noqa: E402


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
