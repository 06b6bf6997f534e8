"""``hrlsched results``: docs/results.md and the README's tables from small
generated outputs, the rest of each file kept, and the committed pages name
the command that made them."""

from __future__ import annotations

import csv
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hrlsched.cli import app
from hrlsched.experiments.experiment import COLUMNS
from hrlsched.experiments.results import (
    BEGIN,
    END,
    Case,
    ResultsError,
    evaluation_tables,
    made_by,
    replace_tables,
    write_results_page,
)

ROOT = Path(__file__).resolve().parents[1]
H = 3600.0


def _experiment(folder: Path, drop: str | None = None, oracle_on: tuple[str, ...] = ("default", "comm")) -> Path:
    """A tiny output of ``experiment main``: fifo and srtf (an oracle) on two settings, seeds 0 and 1."""
    figures = {  # (setting, policy) -> per seed: avg JCT (s), GPU util, restarts
        ("default", "fifo"): [(1 * H, 0.5, 0), (2 * H, 0.5, 2)],
        ("default", "srtf"): [(1 * H, 0.6, 4), (1 * H, 0.6, 4)],
        ("comm", "fifo"): [(1 * H, 0.4, 0), (1 * H, 0.4, 0)],
        ("comm", "srtf"): [(2 * H, 0.3, 1), (2 * H, 0.3, 1)],
    }
    folder.mkdir(parents=True)
    columns = [c for c in COLUMNS if c != drop]
    with open(folder / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, columns, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for (setting, policy), seeds in figures.items():
            oracle = policy == "srtf" and setting in oracle_on
            for seed, (avg, util, restarts) in enumerate(seeds):
                w.writerow({"experiment": "main", "factor": "scenario", "value": setting, "scenario": setting,
                            "policy": policy, "seed": seed, "information": "truth" if oracle else "",
                            "oracle": "true" if oracle else "false", "avg_jct_s": avg,
                            "p95_jct_s": 2 * avg, "p99_jct_s": 3 * avg, "makespan_s": 10 * H, "gpu_util_mean": util,
                            "restarts_total": restarts, "max_ftf": 1.5, "lower_bound_avg_jct_s": 0.5 * H})
    (folder / "experiment.json").write_text(json.dumps({
        "experiment": "main", "command": f"hrlsched experiment main --seeds 0-1 --out {folder}", "version": "0.1.0",
        "quick": False, "runs": 10, "workers": 2, "invocations": [{"wall_s": 90.0, "runs_run": 10}]}))
    return folder


def test_results_page_from_a_small_experiment(tmp_path: Path) -> None:
    folder = _experiment(tmp_path / "exp")
    page = write_results_page(tmp_path / "results.md", folder, "hrlsched results --experiment exp")
    text = page.read_text()
    assert text.startswith(f"# Results\n\n{BEGIN}; made by: hrlsched results --experiment exp (")
    assert made_by(text) == "hrlsched results --experiment exp"
    assert f"the output of `hrlsched experiment main --seeds 0-1 --out {folder}`" in text
    assert "(hrlsched 0.1.0, full size, 2 workers: 10 runs in 1.5 minutes of wall time)" in text
    # the overview: average JCT per workload, the lowest in bold, the oracle marked; t(0.975, 1) = 12.706
    assert ("| policy | `default` | `comm` |\n|---|---|---|\n"
            "| fifo | 1.500 ± 6.353 | **1.000 ± 0.000** |\n"
            "| srtf (oracle) | **1.000 ± 0.000** | 2.000 ± 0.000 |\n"
            "| lower bound | 0.500 ± 0.000 | 0.500 ± 0.000 |\n") in text
    # per workload, fastest first; GPU utilisation's best is its highest; ties all bold
    assert ("## `default`\n\nEvery policy on `default`, fastest average JCT first.\n\n"
            "| policy | avg JCT (h) | p95 JCT (h) | p99 JCT (h) | makespan (h) | GPU util | restarts | max FTF |\n"
            "|---|---|---|---|---|---|---|---|\n"
            "| srtf (oracle) | **1.000 ± 0.000** | **2.00 ± 0.00** | **3.00 ± 0.00** | **10.00 ± 0.00** | "
            "**0.600 ± 0.000** | 4 ± 0 | **1.50 ± 0.00** |\n"
            "| fifo | 1.500 ± 6.353 | 3.00 ± 12.71 | 4.50 ± 19.06 | **10.00 ± 0.00** | 0.500 ± 0.000 | **1 ± 13** | "
            "**1.50 ± 0.00** |\n"
            "| lower bound | 0.500 ± 0.000 | - | - | - | - | - | - |\n") in text
    assert text.endswith(f"\n{END}\n")


@pytest.mark.parametrize("invocations,says", [
    ([{"wall_s": 60.0, "runs_run": 4}], "10 runs, 4 of them run by the invocations recorded there, in 1.0 minutes "
                                        "of wall time; the others were kept from an earlier output of the same runs"),
    ([{"wall_s": 60.0, "runs_run": 10}, {"wall_s": 30.0, "runs_run": 2}],
     "10 runs in 1.5 minutes of wall time, 2 of them run again by a later invocation")])
def test_results_page_says_which_invocations_ran_the_runs(tmp_path: Path, invocations: list[dict[str, float]],
                                                          says: str) -> None:
    folder = _experiment(tmp_path / "exp")
    meta = json.loads((folder / "experiment.json").read_text())
    (folder / "experiment.json").write_text(json.dumps({**meta, "invocations": invocations}))
    assert f"2 workers: {says})" in write_results_page(tmp_path / "results.md", folder, "c").read_text()


def test_results_page_marks_an_oracle_per_workload_where_it_differs(tmp_path: Path) -> None:
    folder = _experiment(tmp_path / "exp", oracle_on=("default",))
    text = write_results_page(tmp_path / "results.md", folder, "c").read_text()
    assert "| srtf | **1.000 ± 0.000** (oracle) | 2.000 ± 0.000 |\n" in text
    assert "\n| srtf | 2.000 ± 0.000 |" in text  # comm's table: no mark


def test_results_page_keeps_its_reading(tmp_path: Path) -> None:
    folder = _experiment(tmp_path / "exp")
    head, tail = "# Results\n\nThe reading, by hand.\n\n", "\nA note below.\n"
    page = tmp_path / "results.md"
    page.write_text(f"{head}{BEGIN} -->\nold figures\n{END}\n{tail}")
    write_results_page(page, folder, "hrlsched results --experiment exp")
    text = page.read_text()
    assert text.startswith(head + BEGIN) and text.endswith(f"{END}\n{tail}")
    assert "old figures" not in text
    write_results_page(page, folder, "hrlsched results --experiment exp")
    assert page.read_text() == text  # the same inputs, the same page


@pytest.mark.parametrize("drop,match", [("max_ftf", r"results.csv: no column max_ftf; expected the columns"),
                                        ("policy", r"no column policy")])
def test_results_page_names_a_missing_column(tmp_path: Path, drop: str, match: str) -> None:
    folder = _experiment(tmp_path / "exp", drop=drop)
    with pytest.raises(ResultsError, match=match):
        write_results_page(tmp_path / "results.md", folder, "c")


def test_results_page_names_a_missing_folder_and_a_missing_run(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"nowhere: no such folder; expected the output folder of `hrlsched "
                                           r"experiment main`"):
        write_results_page(tmp_path / "results.md", tmp_path / "nowhere", "c")
    folder = _experiment(tmp_path / "exp")
    lines = (folder / "results.csv").read_text().splitlines(keepends=True)
    (folder / "results.csv").write_text("".join(lines[:-1]))  # srtf's seed 1 on comm lost
    with pytest.raises(ResultsError, match=r"srtf on comm has seeds \[0\]; expected the seeds of every other cell"):
        write_results_page(tmp_path / "results.md", folder, "c")


README = """# title

Prose above.

{begin} -->
| old | table |
|---|---|
| 1 | 2 |

Prose between the tables.

| old |
|---|
{end}
Prose below.
"""


def test_readme_rewrite_keeps_everything_outside_the_tables() -> None:
    text = README.format(begin=BEGIN, end=END)
    new = replace_tables(text, ["| a |\n|---|\n| 1 |\n", "| b |\n|---|\n| 2 |\n"], "hrlsched results --x y", "R")
    before, after = text.split(BEGIN)
    assert new.startswith(before)
    assert new.endswith(text[text.index(END):])
    assert (f"{BEGIN}; made by: hrlsched results --x y (the tables up to results:end are its output; the prose "
            "between them is kept) -->\n| a |\n|---|\n| 1 |\n\nProse between the tables.\n\n| b |\n|---|\n| 2 |\n"
            f"{END}\n") in new
    assert made_by(new) == "hrlsched results --x y"
    assert replace_tables(new, ["| a |\n|---|\n| 1 |\n", "| b |\n|---|\n| 2 |\n"], "hrlsched results --x y",
                          "R") == new


def test_readme_rewrite_fails_clearly_without_its_markers() -> None:
    with pytest.raises(ResultsError, match=r"R: 0 begin and 0 end marker lines; expected one line starting with "
                                           r"'<!-- results:begin'"):
        replace_tables("# title\n\n| a |\n", ["| b |\n"], "c", "R")
    with pytest.raises(ResultsError, match=r"R: 1 begin and 0 end marker lines"):
        replace_tables(f"{BEGIN} -->\n| a |\n", ["| b |\n"], "c", "R")
    with pytest.raises(ResultsError, match=r"R: the end marker comes before the begin marker"):
        replace_tables(f"{END}\n{BEGIN} -->\n", ["| b |\n"], "c", "R")
    with pytest.raises(ResultsError, match=r"R: 2 table\(s\) between the results markers; expected 1"):
        replace_tables(README.format(begin=BEGIN, end=END), ["| b |\n"], "c", "R")


EVALUATION = [  # row, kind, oracle, avg JCT (s)
    ("hrl", "agent", "true", 4503.93), ("rules-only", "ablation", "true", 4459.33),
    ("hint-alone", "ablation", "true", 4929.48), ("optimus-tuned", "heuristic", "true", 4459.33),
    ("optimus+pack", "heuristic", "false", 5359.16), ("srtf", "heuristic", "true", 7251.18),
    ("lower bound", "bound", "false", 3387.32)]


def _evaluation(root: Path, case: str, scenario: str, seeds: list[int], srtf_s: float | None = None,
                page_seeds: str | None = None) -> None:
    folder = root / "runs" / f"evaluate-{case}"
    folder.mkdir(parents=True)
    with open(folder / "evaluation.csv", "w") as fh:
        fh.write("row,kind,oracle,information,best_heuristic,unfinished_jobs,avg_jct_s,avg_jct_s_ci95,"
                 "agent_minus_row_s,agent_minus_row_s_ci95,agent_wins,seeds\n")
        for row, kind, oracle, avg in EVALUATION:
            avg = srtf_s if row == "srtf" and srtf_s is not None else avg
            fh.write(f"{row},{kind},{oracle},,false,0,{avg},1,,,0,{len(seeds)}\n")
    (folder / "evaluation.json").write_text(json.dumps({"scenario": scenario, "overrides": [], "seeds": seeds}))
    pages = root / "docs" / "evaluation"
    pages.mkdir(parents=True, exist_ok=True)
    (pages / f"{case}.md").write_text(
        f"<!-- made by: hrlsched evaluate --scenario {scenario} --seeds {page_seeds or f'0-{len(seeds) - 1}'} "
        f"--out runs/evaluate-{case} --markdown docs/evaluation/{case}.md -->\n\ntable\n")


def test_readme_tables_from_small_evaluations(tmp_path: Path) -> None:
    _evaluation(tmp_path, "a", "default", [0, 1])
    _evaluation(tmp_path, "b", "comm", [0, 1, 2], srtf_s=4000.0)  # an oracle heuristic the best other one
    tables = evaluation_tables(tmp_path / "runs", tmp_path / "README.md",
                               [[Case("a", "the first")], [Case("b", "the second")]])
    header = ("| scenario | seeds | agent (`hrl`) | its rules (`optimus-tuned`) | its hint alone | "
              "best other heuristic | lower bound |\n|---|---|---|---|---|---|---|\n")
    assert tables == [
        header + "| [`default`](docs/evaluation/a.md): the first | 0-1 | 1.251 | **1.239** | 1.369 | "
                 "1.489 (optimus+pack) | 0.941 |\n",
        header + "| [`comm`](docs/evaluation/b.md): the second | 0-2 | 1.251 | 1.239 | 1.369 | "
                 "**1.111** (srtf, oracle) | 0.941 |\n"]


def test_readme_tables_name_the_agents_rules_from_its_evaluation(tmp_path: Path) -> None:
    """An agent whose rules place by migrate: its rules are that heuristic,
    and plain optimus-tuned is one of the others."""
    for case in ("a", "b"):
        _evaluation(tmp_path, case, "default", [0, 1])
        meta = tmp_path / "runs" / f"evaluate-{case}" / "evaluation.json"
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "rules_heuristic": "optimus-tuned+migrate"}))
    (t,) = evaluation_tables(tmp_path / "runs", tmp_path / "README.md", [[Case("a", "x")]])
    assert "its rules (`optimus-tuned+migrate`)" in t and "(optimus-tuned, oracle)" in t
    meta = tmp_path / "runs" / "evaluate-b" / "evaluation.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "rules_heuristic": "optimus-tuned"}))
    with pytest.raises(ResultsError, match="agents with other rules"):
        evaluation_tables(tmp_path / "runs", tmp_path / "README.md", [[Case("a", "x"), Case("b", "y")]])


def test_readme_tables_name_what_is_missing(tmp_path: Path) -> None:
    _evaluation(tmp_path, "a", "default", [0, 1])
    (tmp_path / "docs" / "evaluation" / "b.md").write_text(
        "<!-- made by: hrlsched evaluate --scenario comm --seeds 0-1 --out runs/evaluate-b --markdown b.md -->\n")
    with pytest.raises(ResultsError, match=r"evaluate-b: no such folder; expected the output of `hrlsched evaluate` "
                                           r"\(b.md was made by: hrlsched evaluate --scenario comm"):
        evaluation_tables(tmp_path / "runs", tmp_path / "README.md", [[Case("a", "x"), Case("b", "y")]])
    lines = (tmp_path / "runs" / "evaluate-a" / "evaluation.csv").read_text().splitlines(keepends=True)
    (tmp_path / "runs" / "evaluate-a" / "evaluation.csv").write_text(
        "".join(line.replace(",avg_jct_s,", ",jct,") for line in lines))
    with pytest.raises(ResultsError, match=r"evaluation.csv: no column avg_jct_s; expected the columns of "
                                           r"`hrlsched evaluate`: row, kind"):
        evaluation_tables(tmp_path / "runs", tmp_path / "README.md", [[Case("a", "x")]])


def test_readme_tables_refuse_a_folder_its_page_did_not_make(tmp_path: Path) -> None:
    _evaluation(tmp_path, "a", "default", [0, 1], page_seeds="0-19")
    with pytest.raises(ResultsError, match=r"evaluate-a: seeds \[\[0, 1\]\], but .*a.md was made with "
                                           r"\[\[0, 1, 2, .*expected the folder that command wrote"):
        evaluation_tables(tmp_path / "runs", tmp_path / "README.md", [[Case("a", "x")]])


def test_write_readme_tables_rewrites_a_readme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _evaluation(tmp_path, "a", "default", [0, 1])
    _evaluation(tmp_path, "b", "comm", [0, 1])
    readme = tmp_path / "README.md"
    readme.write_text(README.format(begin=BEGIN, end=END))
    from hrlsched.experiments import results

    monkeypatch.setattr(results, "EVALUATION_TABLES", ((Case("a", "x"),), (Case("b", "y"),)))
    result = CliRunner().invoke(app, ["results", "--evaluations", str(tmp_path / "runs"), "--readme", str(readme)])
    assert result.exit_code == 0, result.output
    text = readme.read_text()
    assert made_by(text) == f"hrlsched results --evaluations {tmp_path / 'runs'} --readme {readme}"
    assert "| [`comm`](docs/evaluation/b.md): y | 0-1 |" in text and "| old |" not in text
    assert text.startswith("# title\n\nProse above.\n\n") and text.endswith(f"{END}\nProse below.\n")


def test_write_readme_tables_keeps_a_row_without_its_folder_and_names_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A case evaluated again rewrites its row; a row whose folder is gone stays as the earlier run wrote
    it, and the command names it; with no folder at all, nothing is rewritten."""
    from hrlsched.experiments import results

    _evaluation(tmp_path, "a", "default", [0, 1])
    _evaluation(tmp_path, "b", "comm", [0, 1])
    _evaluation(tmp_path, "c", "hetero", [0, 1])
    readme = tmp_path / "README.md"
    readme.write_text(README.format(begin=BEGIN, end=END))
    monkeypatch.setattr(results, "EVALUATION_TABLES", ((Case("a", "x"), Case("b", "y")), (Case("c", "z"),)))
    args = ["results", "--evaluations", str(tmp_path / "runs"), "--readme", str(readme)]
    assert CliRunner().invoke(app, args).exit_code == 0
    before = readme.read_text()
    row_a = next(line for line in before.splitlines() if "docs/evaluation/a.md" in line)
    (tmp_path / "runs" / "evaluate-a" / "evaluation.csv").unlink()  # an evaluation under way: kept too
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and ": a" in result.output and readme.read_text() == before, result.output
    shutil.rmtree(tmp_path / "runs" / "evaluate-a")
    csv_b = tmp_path / "runs" / "evaluate-b" / "evaluation.csv"
    csv_b.write_text(csv_b.read_text().replace("4503.93", "3600.0"))  # the agent of b evaluated again: 1.000 h
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "rows kept as they were" in result.output and ": a" in result.output
    after = readme.read_text()
    assert row_a in after.splitlines() and "| [`comm`](docs/evaluation/b.md): y | 0-1 | **1.000** |" in after
    shutil.rmtree(tmp_path / "runs" / "evaluate-b")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "a, b" in result.output  # (a table of kept rows alone: headed as the others)
    shutil.rmtree(tmp_path / "runs" / "evaluate-c")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "no evaluate-<case> folder for any row" in result.output


def test_results_command_needs_an_input_and_names_a_missing_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["results"])
    assert result.exit_code == 2 and "expected --experiment DIR" in result.output
    result = CliRunner().invoke(app, ["results", "--experiment", str(tmp_path / "none"),
                                      "--page", str(tmp_path / "r.md")])
    assert result.exit_code == 2 and "none: no such folder" in result.output
    assert not (tmp_path / "r.md").exists()


# ------------------------------------------------------------------ the committed pages

def _command_parses(command: str) -> None:
    words = shlex.split(command)
    assert words[:2] == ["hrlsched", "results"], command
    cmd = typer.main.get_command(app).commands["results"]  # type: ignore[attr-defined]
    cmd.make_context("results", words[2:])  # an unknown option or a bad value raises


@pytest.mark.parametrize("path", ["README.md", "docs/results.md"])
def test_committed_pages_name_their_command(path: str) -> None:
    text = (ROOT / path).read_text()
    command = made_by(text)
    assert command is not None, f"{path}: no line starting with {BEGIN!r} naming its command"
    _command_parses(command)
    assert text.count(BEGIN) == 1 and text.count(END) == 1


def test_readme_figures_are_their_evaluation_pages() -> None:
    """Each README row's agent, rules and hint are its linked page's
    ``hrl``, ``rules-only`` and ``hint-alone`` (the same evaluate run)."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index(BEGIN):text.index(END)]
    rows = re.findall(r"^\| \[`[^`]+`\]\(([^)]+)\)[^|]*\| [^|]+ \| ([^|]+) \| ([^|]+) \| ([^|]+) \|", block, re.M)
    assert len(rows) == 11
    for link, *cells in rows:
        page = (ROOT / link).read_text()
        for name, cell in zip(("hrl", "rules-only", "hint-alone"), cells, strict=True):
            m = re.search(rf"^\| {re.escape(name)} \| ([0-9.]+) ", page, re.M)
            assert m is not None, f"{link}: no row {name}"
            assert cell.strip().strip("*") == m.group(1), f"{link}: {name} {cell.strip()} in the README, {m.group(1)}"
