"""``hrlsched checkpoint show``."""

import json
from pathlib import Path

from typer.testing import CliRunner

from hrlsched.cli import app
from hrlsched.policies.hint import SHIPPED

ROOT = Path(__file__).resolve().parents[1] / "src" / "hrlsched"


def test_show_prints_the_shipped_agents_hint_provenance_and_schema() -> None:
    r = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "agent/checkpoints/hrl-default.pt"), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["hint"]["text"] == SHIPPED.text()  # the shipped agent's hint is HintConfig's SHIPPED
    assert info["provenance"]["part"] == "allocate" and info["env_kwargs"]["placement"] == "migrate"  # since step 12
    assert info["parameters"] > 1000 and "jobs" in info["schema"]
    r = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "agent/checkpoints/hrl-default.pt")])
    assert r.exit_code == 0 and "remaining_weight" in r.output and "feature schema" in r.output


def test_show_reads_the_rivals_and_refuses_other_files(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "rivals/checkpoints/dl2-default.pt"), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["provenance"]["kind"] == "dl2" and "hint" not in info
    bad = tmp_path / "x.pt"
    bad.write_text("not a checkpoint")
    r = CliRunner().invoke(app, ["checkpoint", "show", str(bad)])
    assert r.exit_code == 2 and "not a readable hrlsched checkpoint" in r.output


def test_show_prints_the_hetero_agents_learned_residual() -> None:
    from hrlsched.agent.residual import RESIDUAL_FEATURES

    r = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "agent/checkpoints/hrl-hetero.pt"), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert list(info["residual"]) == list(RESIDUAL_FEATURES) and info["residual"]["half_x_arrived"] > 0
    # train-es's config: both loads, the residual's halving weights alone learned
    assert info["config"]["method"] == "cem" and info["config"]["cases"] == ["hetero", "hetero@workload.duration_h=32"]
    assert not any(info["residual"][f] for f in info["config"]["drop"])


def test_show_prints_the_shipped_placement_choices_and_their_families() -> None:
    """The shipped learned placements (one per cluster family; the hetero agent's over its residual):
    their weights, the cases they were trained on and the held-back seeds, none of them an
    evaluation seed (0-99)."""
    from hrlsched.agent.placement_choice import PLACEMENT_FEATURES

    quarter = ["hetero", "hetero@workload.duration_h=32"]
    for name, cases, placement, learn in (("hrl-placement-default.pt", ["default", "comm"], "migrate", "placement"),
                                          ("hrl-placement-ps-small.pt", ["ps-small"], "pack", "placement"),
                                          ("hrl-hetero.pt", quarter, "pack", "residual")):
        r = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "agent/checkpoints" / name), "--json"])
        assert r.exit_code == 0, r.output
        info = json.loads(r.output)
        assert list(info["placement"]) == list(PLACEMENT_FEATURES) and all(info["placement"].values()), name
        assert info["config"]["cases"] == cases and info["config"]["learn"] == [learn], name
        assert info["env_kwargs"]["placement"] == placement, name
        assert min(info["config"]["held_back"]) >= 100, name
    # the hetero agent's earlier steps, each named by its own training config (its --init path now holds
    # this file): the placement choice (8 CEM iterations), over the first residual (6 CEM iterations on hetero)
    steps = [(s["method"], s["scenario"], s["iterations"]) for s in info["started_from"]]
    assert steps == [("cem", "hetero", 8), ("cem", "hetero", 6)]
    r = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "agent/checkpoints/hrl-hetero.pt")])
    assert "started from (--init)" in r.output


def test_rules_only_writes_the_ablation_as_a_checkpoint(tmp_path: Path) -> None:
    """``checkpoint rules-only`` keeps the hint and the placement, drops every
    learned part; the file decides as ``optimus-tuned+migrate`` (the ablation's
    equality is tested in test_rules), and a file with no rules is refused."""
    from hrlsched.agent.checkpoint import load

    out = tmp_path / "rules.pt"
    r = CliRunner().invoke(app, ["checkpoint", "rules-only", str(ROOT / "agent/checkpoints/hrl-default.pt"), str(out)])
    assert r.exit_code == 0, r.output
    ck = load(out)
    assert "selector" not in ck and "residual" not in ck and "placement" not in ck and "ablation" not in ck
    assert ck["env_kwargs"]["placement"] == "migrate" and ck["env_kwargs"]["hint"]
    assert not ck["state_dict"]["cand.2.weight"].any()
    r = CliRunner().invoke(app, ["checkpoint", "rules-only", str(ROOT / "rivals/checkpoints/dl2-default.pt"),
                                 str(tmp_path / "no.pt")])
    assert r.exit_code == 2 and "error" in r.output and not (tmp_path / "no.pt").exists()


def test_list_names_every_shipped_checkpoint_and_a_name_stands_for_its_file(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """``checkpoint list``: every file under the two checkpoint folders by its stem, with the policy
    it is the default of and what it learned; ``--checkpoint NAME`` (here ``show`` and ``simulate``)
    reads that file, a local file of the name first; an unknown name is refused with the names."""
    from hrlsched.agent.common.shipped import checkpoint_path

    r = CliRunner().invoke(app, ["checkpoint", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    files = sorted((ROOT / "agent/checkpoints").glob("*.pt")) + sorted((ROOT / "rivals/checkpoints").glob("*.pt"))
    assert list(rows) == [p.stem for p in files] and len(rows) >= 7
    assert [Path(x["file"]).resolve() for x in rows.values()] == [p.resolve() for p in files]
    assert {n: x["default of"] for n, x in rows.items() if x["default of"]} == {
        "hrl-default": "hrl", "dl2-default": "dl2", "harmony-default": "harmony"}
    assert rows["hrl-hetero"]["kind"] == "hrl" and rows["hrl-hetero"]["learned"] == "residual, placement choice"
    assert rows["hrl-default"]["learned"] == "point selector" and rows["hrl-default"]["rules placed by"] == "migrate"
    assert rows["harmony-ps-small"]["kind"] == "harmony" and rows["harmony-ps-small"]["trained on"] == "ps-small"
    by_name = CliRunner().invoke(app, ["checkpoint", "show", "hrl-hetero", "--json"])
    by_path = CliRunner().invoke(app, ["checkpoint", "show", str(ROOT / "agent/checkpoints/hrl-hetero.pt"), "--json"])
    assert by_name.exit_code == 0 and by_name.output == by_path.output
    r = CliRunner().invoke(app, ["checkpoint", "show", "hrl-nope"])
    assert r.exit_code == 2 and "no such checkpoint file" in r.output and "hrl-hetero" in r.output
    # only a bare name is looked up, and a file of that name here wins
    monkeypatch.chdir(tmp_path)
    assert checkpoint_path("hrl-hetero").resolve() == (ROOT / "agent/checkpoints/hrl-hetero.pt").resolve()
    assert checkpoint_path("hrl-hetero.pt") == Path("hrl-hetero.pt") and checkpoint_path("x/hrl-hetero") == Path("x/hrl-hetero")
    (tmp_path / "hrl-hetero").write_bytes(b"")
    assert checkpoint_path("hrl-hetero") == Path("hrl-hetero")
    (tmp_path / "hrl-hetero").unlink()
    r = CliRunner().invoke(app, ["simulate", "--scenario", "default", "--policy", "hrl", "--checkpoint", "hrl-hetero",
                                 "--set", "workload.jobs=6", "--set", "workload.duration_h=0.2", "--out", "run"])
    assert r.exit_code == 0, r.output
    assert f"checkpoint: {(ROOT / 'agent/checkpoints/hrl-hetero.pt').resolve()}" in (tmp_path / "run/config.yaml").read_text()
