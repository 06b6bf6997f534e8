"""``hrlsched evaluate``, ``explain``, ``reproduce pollux-sim`` and
``compare --markdown``: the agent against its ablations (built from its own
checkpoint), the heuristics and the bound, paired by seed; where it departs
from its rules; tables written as markdown with the command that made them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from hrlsched.agent.common.shipped import shipped_checkpoint  # noqa: E402
from hrlsched.cli import app  # noqa: E402
from hrlsched.experiments import ablation  # noqa: E402
from hrlsched.seeds import parse_seeds, seeds_text  # noqa: E402

TINY = ["--set", "workload.jobs=12", "--set", "workload.duration_h=0.5"]


class Result:
    """A command's exit code and output, its lines unwrapped (rich wraps errors)."""

    def __init__(self, r) -> None:  # noqa: ANN001
        self.exit_code, self.raw, self.output = r.exit_code, r.output, " ".join(r.output.split())


def invoke(*args: str) -> Result:
    return Result(CliRunner().invoke(app, list(args)))


@pytest.mark.parametrize("cmd", [["evaluate"], ["explain"], ["reproduce", "pollux-sim"]])
def test_help_parses(cmd: list[str]) -> None:
    r = invoke(*cmd, "--help")
    assert r.exit_code == 0 and "Usage" in r.output, r.output


def test_seeds_text_is_parsed_and_bad_text_refused() -> None:
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,3,5") == [0, 3, 5]
    assert parse_seeds("0-2,10") == [0, 1, 2, 10]
    assert seeds_text([0, 1, 2, 10, 12, 13]) == "0-2,10,12-13"
    for bad, why in [("0-x", "not a seed or a range"), ("4-1", "ends before it starts"), ("1,1", "more than once"),
                     ("", "not a seed"), ("-3", "expected seeds"), ("1.5", "not a seed")]:
        with pytest.raises(ValueError, match=why):
            parse_seeds(bad)
    r = invoke("evaluate", "--seeds", "0-x")
    assert r.exit_code == 2 and "--seeds" in r.output and "0-19" in r.output, r.output


def test_ablations_are_built_from_the_checkpoint(tmp_path: Path) -> None:
    from hrlsched.experiments import learned

    ck = learned.load(learned.shipped_checkpoint())
    rules, hint = ablation.rules_only(ck), ablation.hint_alone(ck)
    for k in ablation.SCORER:
        assert not rules["state_dict"][k].any() and not hint["state_dict"][k].any()
    # what the shipped agent learned (its point selector; its free scorer is silenced already) goes
    assert "selector" in ck and "selector" not in rules and "selector" not in hint
    assert torch.equal(rules["state_dict"]["gap"], ck["state_dict"]["gap"]) and float(rules["state_dict"]["gap"]) != 0
    assert torch.equal(rules["state_dict"]["bonus"], ck["state_dict"]["bonus"])
    assert float(hint["state_dict"]["gap"]) == 0 and float(hint["state_dict"]["bonus"]) == 1
    bare = {**ck, "state_dict": {k: v for k, v in ck["state_dict"].items() if k != "cand.2.bias"}}
    with pytest.raises(ablation.AblationError, match="cand.2.bias"):
        ablation.rules_only(bare)
    with pytest.raises(ablation.AblationError, match="hint"):
        ablation.rules_only({**ck, "env_kwargs": {}})
    paths = ablation.ablated_checkpoints(learned.shipped_checkpoint(), tmp_path)
    assert sorted(paths) == [ablation.HINT_ALONE, ablation.RULES_ONLY]
    assert all(p.is_file() and ablation.source_tag(learned.shipped_checkpoint()) in p.name for p in paths.values())


def test_an_agent_placed_by_migrate_has_those_rules_and_its_lookahead_must_start_from_them(tmp_path: Path) -> None:
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.experiments import learned
    from hrlsched.experiments.evaluate import evaluate

    ck = learned.load(learned.shipped_checkpoint())
    ck = {**ck, "env_kwargs": {**ck["env_kwargs"], "placement": "migrate"}}
    assert ablation.rules_heuristic(ck) == "optimus-tuned+migrate"
    assert ablation.rules_heuristic(learned.load(learned.shipped_checkpoint())).startswith("optimus-tuned")
    path = tmp_path / "migrate.pt"
    from hrlsched.agent.common import checkpoint as common

    common.save(path, ck)
    assert ckpt.load(path)["env_kwargs"]["placement"] == "migrate"
    with pytest.raises(ValueError, match="add place=migrate"):
        evaluate("default", [0], tmp_path / "ev", checkpoint=path, lookahead="every=24", heuristics=["fifo"])
    made, _ = ablation.placed_rules(path, tmp_path / "placed")  # its rules-only row is placed by migrate
    assert set(made) == {f"rules+{p}" for p in ablation.PLACEMENTS if p != "migrate"}


def test_hint_alone_is_the_hint_heuristic(tmp_path: Path) -> None:
    """The hint-alone checkpoint runs as ``optimus`` with the checkpoint's
    hint options placed by ``pack`` (benchmarks/hrl_quality.py's hint alone),
    to float rounding."""
    from hrlsched.config import resolve_run_config
    from hrlsched.experiments import learned
    from hrlsched.policies.base import ComposedScheduler
    from hrlsched.policies.registry import PLACEMENTS
    from hrlsched.run import simulate

    sets = ["workload.jobs=20", "workload.duration_h=1"]
    path = ablation.ablated_checkpoints(learned.shipped_checkpoint(), tmp_path)[ablation.HINT_ALONE]
    a = simulate(resolve_run_config("default", "hrl", 1, [*sets, f"checkpoint={path}"])).finish_s
    ck = learned.load(path)
    kw = ck["env_kwargs"]
    hint = ComposedScheduler(learned.hint_of(ck).make_policy(kw["worker_options"]), PLACEMENTS[kw["placement"]].factory())
    b = simulate(resolve_run_config("default", "fifo", 1, sets), scheduler=hint).finish_s
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_evaluate_writes_the_table_and_reuses_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, md = tmp_path / "ev", tmp_path / "table.md"
    args = ["evaluate", "--seeds", "0,1", "--policies", "optimus+pack,fifo", "--workers", "1", "--out", str(out),
            "--markdown", str(md), *TINY]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    with open(out / "evaluation.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [x["row"] for x in rows] == ["hrl", "rules-only", "hint-alone", "optimus+pack", "fifo", "lower bound"]
    assert sum(x["best_heuristic"] == "true" for x in rows) == 1
    assert float(rows[-1]["avg_jct_s"]) <= min(float(x["avg_jct_s"]) for x in rows[:-1])
    ev = json.loads((out / "evaluation.json").read_text())
    agent = np.array(ev["rows"][0]["per_seed_avg_jct_s"])
    fifo = np.array(ev["rows"][4]["per_seed_avg_jct_s"])
    assert ev["rows"][4]["agent_minus_row_s"] == pytest.approx((agent - fifo).mean())
    assert ev["rows"][4]["agent_wins"] == int((agent < fifo).sum())
    assert ev["departures"]["choices"] > 0
    # the exact predictor makes the agent's predicted remaining work the truth: an oracle's knowledge
    info = {x["row"]: (x["oracle"], x["information"]) for x in ev["rows"]}
    assert info["hrl"] == info["hint-alone"] == (True, "exact predicted work") and info["fifo"] == (False, "")
    assert "oracle (exact predicted work)" in r.output
    for row in ("hrl", "rules-only", "hint-alone", "lower bound", "departs from its rules"):
        assert row in r.output
    text = md.read_text()
    assert text.startswith("<!-- made by: hrlsched evaluate --seeds 0,1 ")
    assert "| rules-only |" in text and "| lower bound |" in text and "| optimus+pack |" in text

    def no_run(*a: object) -> None:
        raise AssertionError("a cached run was run again")

    monkeypatch.setattr("hrlsched.experiments.compare._run_one", no_run)
    monkeypatch.setattr("hrlsched.experiments.explain.explain", no_run)
    again = invoke(*args)
    assert again.exit_code == 0, again.output
    assert json.loads((out / "evaluation.json").read_text())["rows"] == ev["rows"]


def test_information_is_labelled() -> None:
    from hrlsched.experiments.evaluate import information
    from hrlsched.policies.registry import make_scheduler

    got = {p: information(make_scheduler(p)) for p in ("srtf", "srtf-est", "tetris", "optimus", "optimus-tuned",
                                                       "gavel", "gavel-makespan", "fifo", "drf", "lookahead",
                                                       "lookahead/level=placement", "lookahead/futures=4")}
    assert got == {"srtf": "truth", "srtf-est": "", "tetris": "truth", "optimus": "", "optimus-tuned": "predicted work",
                   "gavel": "", "gavel-makespan": "predicted work", "fifo": "", "drf": "", "lookahead": "future",
                   "lookahead/level=placement": "future", "lookahead/futures=4": "sampled futures"}
    from hrlsched.experiments.evaluate import ORACLE_LABELS

    assert "arrivals sampled" in ORACLE_LABELS["sampled futures"]


def test_evaluate_refuses_bad_policies_and_checkpoints(tmp_path: Path) -> None:
    r = invoke("evaluate", "--policies", "fifo,hrl", "--out", str(tmp_path / "a"))
    assert r.exit_code == 2 and "hrl is learned" in r.output
    r = invoke("evaluate", "--policies", "fifo,nope", "--out", str(tmp_path / "b"))
    assert r.exit_code == 2 and "nope" in r.output
    r = invoke("evaluate", "--checkpoint", str(tmp_path / "none.pt"), "--out", str(tmp_path / "c"))
    assert r.exit_code == 2 and "no such checkpoint" in r.output
    from hrlsched.experiments import learned

    ck = learned.load(learned.shipped_checkpoint())
    learned.save(tmp_path / "nohint.pt", {**ck, "env_kwargs": {k: v for k, v in ck["env_kwargs"].items()
                                                               if k not in ("hint", "hint_options")}})
    r = invoke("evaluate", "--checkpoint", str(tmp_path / "nohint.pt"), "--out", str(tmp_path / "d"))
    assert r.exit_code == 2 and "without a hint" in r.output, r.output
    assert not any((tmp_path / x).exists() for x in "acd")


def test_evaluate_sets_other_checkpoints_against_the_agent(tmp_path: Path) -> None:
    """``--versus``: another checkpoint of the agent as a row, paired by seed; the agent's own
    file there gives its figures exactly, another file its own (here a shipped one by its name,
    ``hrlsched checkpoint list``); a bad one is refused before any run."""
    from hrlsched.experiments import learned

    own = learned.shipped_checkpoint()
    r = invoke("evaluate", "--seeds", "0-1", "--no-ablate", "--policies", "fifo", "--versus", str(own),
               "--versus", "hrl-hetero", "--out", str(tmp_path / "e"), "--workers", "1", *TINY)
    assert r.exit_code == 0, r.output
    rows = {x["row"]: x for x in json.loads((tmp_path / "e" / "evaluation.json").read_text())["rows"]}
    assert rows["vs-hrl-default"]["per_seed_avg_jct_s"] == rows["hrl"]["per_seed_avg_jct_s"]
    assert rows["vs-hrl-default"]["agent_minus_row_s"] == 0 and rows["vs-hrl-default"]["kind"] == "other checkpoint"
    assert rows["vs-hrl-hetero"]["per_seed_avg_jct_s"] != rows["hrl"]["per_seed_avg_jct_s"]  # its residual decides
    assert "vs-hrl-hetero" in r.output
    r = invoke("evaluate", "--versus", str(tmp_path / "none.pt"), "--out", str(tmp_path / "f"))
    assert r.exit_code == 2 and "--versus" in r.output and "no such checkpoint" in r.output, r.output
    r = invoke("evaluate", "--versus", str(own), "--versus", str(own), "--out", str(tmp_path / "g"))
    assert r.exit_code == 2 and "same file name" in r.output, r.output
    (tmp_path / "a@b.pt").write_bytes(own.read_bytes())
    r = invoke("evaluate", "--versus", str(tmp_path / "a@b.pt"), "--out", str(tmp_path / "h"))
    assert r.exit_code == 2 and "may not contain '@'" in r.output, r.output
    assert not any((tmp_path / x).exists() for x in "fgh")


def test_explain_counts_the_departures() -> None:
    r = invoke("explain", "--seed", "0", "--json", *TINY)
    assert r.exit_code == 0, r.output
    d = json.loads(r.raw)
    assert d["choices"] == sum(d["counts"].values()) > 0 and "same as the rules" in d["counts"]
    assert len(d["examples"]) == min(5, d["choices"] - d["counts"]["same as the rules"])
    r = invoke("explain", "--play", "hint", *TINY)
    assert r.exit_code == 0 and "the hint played" in r.output and "level-1 choices" in r.output, r.output
    r = invoke("explain", "--play", "nobody")
    assert r.exit_code == 2 and "--play" in r.output
    r = invoke("explain", "--policy", "dl2", "--json", *TINY)
    assert r.exit_code == 0, r.output
    d = json.loads(r.raw)
    assert d["points"] > 0 and sum(d["counts"].values()) > 0 and set(d["counts"]) == {"same", "more", "fewer"}
    assert d["window"] == 40 and d["points_window_full"] == 0 and d["job_hours_outside_window"] == 0.0
    assert 0.0 <= d["gpu_hours_idle_held_back"] <= d["gpu_hours_idle"] and d["avg_jct_h"] > 0 and d["unplaced"] == 0


def test_explain_dl2_counts_the_jobs_its_window_leaves_out() -> None:
    """With fewer job slots than active jobs, the later ones wait outside the
    window (no GPU): counted in points and job-hours, and the run's JCT
    is DL2's with that window (``simulate`` of the same scheduler)."""
    from hrlsched.config import resolve_run_config
    from hrlsched.rivals.dl2 import DL2Scheduler
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    r = invoke("explain", "--policy", "dl2", "--window", "2", "--json", *TINY)
    assert r.exit_code == 0, r.output
    d = json.loads(r.raw)
    assert d["window"] == 2 and d["points_window_full"] > 0 and d["job_hours_outside_window"] > 0
    sched = DL2Scheduler()
    sched.set_window(2)
    s = summary(simulate(resolve_run_config("default", "dl2", 0, TINY[1::2]), scheduler=sched), "dl2", "default")
    assert d["avg_jct_h"] == pytest.approx(s["avg_jct_s"] / 3600, rel=1e-12)
    assert "window of 2 jobs" in invoke("explain", "--policy", "dl2", "--window", "2", *TINY).output
    r = invoke("explain", "--window", "2", *TINY)
    assert r.exit_code == 2 and "--window is DL2's" in r.output, r.output


def test_comm_and_large_are_default_with_overrides() -> None:
    """``comm`` and ``large`` (once overrides of hrl_quality.py): the same
    scenario as ``default`` with them, so the same jobs on every seed."""
    from hrlsched.config import resolve_run_config

    for name, sets in [("comm", ["cluster.server_groups.0.nic_gbps=10", "cluster.server_groups.0.switches_per_socket=1",
                                 "cluster.server_groups.0.gpus_per_switch=4"]),
                       ("large", ["cluster.server_groups.0.count=32", "workload.jobs=800"])]:
        a, b = resolve_run_config(name).scenario.dump(), resolve_run_config("default", overrides=sets).scenario.dump()
        assert {k: v for k, v in a.items() if k not in ("name", "description")} == \
            {k: v for k, v in b.items() if k not in ("name", "description")}


def test_compare_writes_markdown_with_its_command(tmp_path: Path) -> None:
    md = tmp_path / "docs" / "results.md"
    r = invoke("compare", "--scenario", "default", "--policies", "fifo", "--seeds", "1", "--workers", "1",
               "--out", str(tmp_path / "cmp"), "--markdown", str(md), *TINY)
    assert r.exit_code == 0, r.output
    text = md.read_text()
    assert text.startswith("<!-- made by: hrlsched compare --scenario default --policies fifo ")
    assert "--set workload.jobs=12" in text.splitlines()[0]
    assert "| fifo |" in text and "| lower bound |" in text


@pytest.mark.slow
def test_pollux_sim_times_ours() -> None:
    from hrlsched.data import data_dir

    if not (data_dir() / "pollux" / "traces").is_dir():
        pytest.skip("no Pollux traces")
    r = invoke("reproduce", "pollux-sim", "--repeats", "1", "--pollux-dir", "/nonexistent")
    assert r.exit_code == 0, r.output
    assert "hrlsched tiresias on Pollux workload-6" in r.output and "could not time it" in r.output


def test_targets_read_the_rules_only_row_and_the_lookahead() -> None:
    from hrlsched.experiments.evaluate import targets

    def row(name: str, kind: str, jct: float, d: float = float("nan"), h: float = float("nan")) -> dict:
        return {"row": name, "kind": kind, "avg_jct_s": jct, "agent_minus_row_s": d, "agent_minus_row_s_ci95": h}

    ev = {"rows": [row("hrl", "agent", 95.0), row("rules-only", "ablation", 100.0, -5.0, 1.0),
                   row("lookahead", "oracle planner", 90.0)]}
    never, pays = targets(ev)
    assert never.endswith("holds") and "takes 50.0%" in pays and pays.endswith("holds")
    ev["rows"][1] = row("rules-only", "ablation", 94.0, 1.0, 0.5)
    never, pays = targets(ev)
    assert "MISSED" in never and "MISSED" in pays
    ev["rows"][2] = row("lookahead", "oracle planner", 99.0)
    assert "not required" in targets(ev)[1]
    ev["rows"][1] = row("rules-only", "ablation", 95.0, 0.02, 0.0)  # seeds replaying one trace: no interval
    assert targets(ev)[0].endswith("holds")  # a job seconds apart is level (under LEVEL_S)


def test_explain_counts_the_points_the_selector_gives_to_a_heuristic(tmp_path: Path) -> None:
    import numpy as np

    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common import checkpoint as common
    from hrlsched.agent.policy import SHIPPED
    from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES, with_selector

    w = np.zeros((len(SELECTOR_POLICIES), len(SELECTOR_FEATURES)))
    w[1, 0] = 1.0  # srtf+pack at every point
    common.save(tmp_path / "s.pt", with_selector(ckpt.load(shipped_checkpoint(SHIPPED)), w))
    r = invoke("explain", "--seed", "0", "--json", "--checkpoint", str(tmp_path / "s.pt"), *TINY)
    assert r.exit_code == 0, r.output
    sel = json.loads(r.raw)["selector"]
    assert sel["points"] > 0 and sel["taken"] == {p: sel["points"] if p == "srtf+pack" else 0 for p in SELECTOR_POLICIES}
    r = invoke("explain", "--seed", "0", "--checkpoint", str(tmp_path / "s.pt"), *TINY)
    assert "the point selector takes another heuristic's whole decision" in r.output, r.output


def test_explain_and_evaluate_count_the_learned_placements_departures(tmp_path: Path) -> None:
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common import checkpoint as common
    from hrlsched.agent.placement_choice import PLACEMENT_FEATURES, with_placement
    from hrlsched.agent.policy import SHIPPED
    from hrlsched.experiments.evaluate import format_table

    r = invoke("explain", "--seed", "0", "--json", *TINY)
    assert json.loads(r.raw)["placement"] is None  # the shipped agent: nothing learned at level 2
    w = np.zeros(len(PLACEMENT_FEATURES))
    w[list(PLACEMENT_FEATURES).index("balance")] = 10.0  # balance's placement wherever it differs from pack's
    common.save(tmp_path / "p.pt", with_placement(ckpt.load(shipped_checkpoint(SHIPPED)), w))
    r = invoke("explain", "--seed", "0", "--json", "--checkpoint", str(tmp_path / "p.pt"), *TINY)
    assert r.exit_code == 0, r.output
    p = json.loads(r.raw)["placement"]
    assert 0 < p["departed"] < p["placed"], p  # 12 jobs: some placed alone, where balance's is pack's
    line = f"the learned placement places {p['departed']} of the {p['placed']} jobs placed anew elsewhere than pack"
    assert line in invoke("explain", "--seed", "0", "--checkpoint", str(tmp_path / "p.pt"), *TINY).output
    ev = {"scenario": "default", "overrides": [], "seeds": [0], "checkpoint": "p.pt", "hint": None, "rows": [],
          "rivals": [], "departures": {"choices": 5, "counts": {"same as the rules": 5}, "seed": 0, "placement": p}}
    assert f"{line} would" in format_table(ev)
    r = invoke("evaluate", "--seeds", "0", "--no-ablate", "--policies", "fifo", "--checkpoint", str(tmp_path / "p.pt"),
               "--out", str(tmp_path / "e"), "--workers", "1", *TINY)
    assert r.exit_code == 0 and line in r.output, r.output  # without the ablation rows too


def test_the_targets_read_the_room_taken_from_the_lookahead_row() -> None:
    from hrlsched.experiments.evaluate import targets

    def ev(agent: float) -> dict:
        return {"rows": [
            {"row": "hrl", "kind": "agent", "avg_jct_s": agent},
            {"row": "rules-only", "kind": "ablation", "avg_jct_s": 4411.17, "agent_minus_row_s": agent - 4411.17,
             "agent_minus_row_s_ci95": 10.0},
            {"row": "lookahead/every=24", "kind": "oracle planner", "avg_jct_s": 4321.48}]}

    never, pays = targets(ev(4366.72))
    assert never.endswith("holds") and "2.0% ahead" in pays and "49.6%" in pays and "by 0.4 points" in pays
    assert targets(ev(4360.0))[1].endswith("holds")
    assert "MISSED" in targets(ev(4430.0))[0]


def test_evaluates_default_rows_are_every_heuristic_of_the_registry() -> None:
    """"Best heuristic" is the best of them all: the agent's rules and their variants first, then
    every allocation policy and scheduler of ``hrlsched policies`` (the literature's too), but
    the learned ones and the oracle planner, each once."""
    from hrlsched.experiments.evaluate import HEURISTICS, every_heuristic
    from hrlsched.policies.registry import all_policies

    rows = every_heuristic()
    assert rows[:len(HEURISTICS)] == HEURISTICS and len(rows) == len(set(rows))
    registered = {p.name for p in all_policies() if p.kind in ("allocation", "scheduler")}
    assert registered - set(rows) == {"hrl", "dl2", "harmony", "lookahead"}
    assert {"pollux", "gavel", "gavel-makespan", "allox", "gandiva-fair", "themis", "optimus-oracle"} <= set(rows)
