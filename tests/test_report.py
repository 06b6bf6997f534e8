"""hrlsched report without a browser: each kind of directory renders into
one page holding its figures, its plots as PNG data, its config, command,
seeds and version; an unknown directory is refused with what was expected;
the page asks for nothing outside itself. (tests/test_report_browser.py
opens a page in Chromium.)"""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrlsched import __version__
from hrlsched.cli import app
from hrlsched.report.files import ReportError
from hrlsched.report.page import PNG_SIGNATURE
from hrlsched.report.render import kind_of, render
from tests.helpers import TINY, tiny_comparison

IMG = re.compile(r'<img src="data:image/png;base64,([^"]+)"')
EXTERNAL = re.compile(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def cli(*args: str) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def images(html: str) -> list[bytes]:
    return [base64.b64decode(x) for x in IMG.findall(html)]


def check_page(html: str, n_images: int) -> None:
    """A whole page: plots that are PNGs, nothing fetched from elsewhere, the version."""
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    imgs = images(html)
    assert len(imgs) == n_images and all(b.startswith(PNG_SIGNATURE) for b in imgs)
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert "<script" not in html and "<link" not in html
    assert f"hrlsched {__version__}" in html


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_comparison(tmp_path_factory.mktemp("report") / "cmp")


def test_comparison_page(comparison: Path) -> None:
    out = cli("report", str(comparison))
    assert "report.html" in out
    html = (comparison / "report.html").read_text()
    check_page(html, 2)  # jct_cdf.png and utilisation.png, embedded whole
    assert images(html)[0] == (comparison / "jct_cdf.png").read_bytes()
    assert kind_of(comparison) == "comparison"
    with open(comparison / "comparison.csv") as fh:
        rows = list(csv.DictReader(fh))
    table = html[html.index('id="main-table"'):html.index("</table>", html.index('id="main-table"'))]
    for r in rows:
        assert f"<td>{r['policy']}</td>" in table
        # the raw figure is kept on its cell, the one shown is in hours
        assert f'data-value="{float(r["avg_jct_s"])!r}"' in table
    command = (comparison / "command.txt").read_text().splitlines()
    assert command[0].startswith("hrlsched compare --scenario default --policies fifo+pack,srtf+pack")
    assert command[1] == f"# hrlsched {__version__}"
    assert "hrlsched compare --scenario default" in html and "runs/fifo_pack/seed0/config.yaml" in html
    assert "<dt>seeds</dt><dd>0</dd>" in html


def test_report_out_option_and_no_leftovers(comparison: Path, tmp_path: Path) -> None:
    target = tmp_path / "pages" / "cmp.html"
    cli("report", str(comparison), "--out", str(target))
    assert target.read_text() == render(comparison)
    assert [p.name for p in target.parent.iterdir()] == ["cmp.html"]  # written whole, no temporary file left


def test_run_page_draws_missing_plots(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["simulate", "--scenario", "default", "--policy", "srtf+pack", "--seed", "3", *TINY]
    cli(*args, "--out", str(run), "--no-plots")
    assert not list(run.glob("*.png"))
    cli(*args, "--out", str(run), "--no-plots", "--force")  # command.txt is a run's file: --force replaces it
    html = render(run)
    check_page(html, 2)  # the CDF and the timeline, drawn in memory
    assert not list(run.glob("*.png"))  # and not written into the run
    summ = json.loads((run / "summary.json").read_text())
    assert f'data-value="{float(summ["avg_jct_s"])!r}"' in html
    assert "srtf+pack" in html and "<dt>seed</dt><dd>3</dd>" in html
    assert "--seed 3" in html and "--no-plots --force" in (run / "command.txt").read_text()
    cli(*args, "--out", str(tmp_path / "run2"))  # with plots: its own are shown
    assert images(render(tmp_path / "run2"))[0] == (tmp_path / "run2" / "jct_cdf.png").read_bytes()
    cfg = run / "config.yaml"  # a hand-edited config: the page names the file and the field
    cfg.write_text(cfg.read_text().replace("count: 2", "count: -2", 1))
    with pytest.raises(ReportError, match=r"config\.yaml: invalid configuration\n.*server_groups\.0\.count: expected a value > 0"):
        render(run)


def test_run_of_a_comparison_names_its_command(comparison: Path) -> None:
    html = render(comparison / "runs" / "srtf_pack" / "seed0")
    assert "hrlsched compare --scenario default" in html and "(this is one of its runs)" in html


def test_evaluation_page(tmp_path: Path) -> None:
    ev = tmp_path / "ev"
    cli("evaluate", "--scenario", "default", "--seeds", "0", "--policies", "fifo+pack", "--no-ablate",
        "--workers", "1", "--out", str(ev), "--set", "workload.jobs=10", *TINY[2:])
    html = render(ev)
    check_page(html, 1)  # the bar chart, drawn for the report
    data = json.loads((ev / "evaluation.json").read_text())
    for r in data["rows"]:
        assert f"<td>{r['row']}</td>" in html and f'data-value="{float(r["avg_jct_s"])!r}"' in html
    assert "hrlsched evaluate --scenario default --seeds 0" in html and "runs/hrl/seed0/config.yaml" in html


def test_experiment_page(tmp_path: Path, comparison: Path) -> None:
    # the files hrlsched experiment writes: results.csv, summary.md, experiment.json, plots
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "results.csv").write_text("experiment,factor,value,policy,seed,avg_jct_s\n"
                                     "load,load,0.5,fifo,0,100.5\nload,load,0.5,fifo,1,120\nload,load,0.5,srtf,0,90\n")
    (exp / "summary.md").write_text("Experiment `load`: offered load. Seeds 0-1.\n\n**avg JCT (h)** by load:\n\n"
                                    "| policy | 0.5 | 1 |\n|---|---|---|\n| fifo | 0.03 ± 0.01 | - |\n\n"
                                    "See [the docs](https://example.org/x). Plots: load-load.png\n")
    (exp / "load-load.png").write_bytes((comparison / "jct_cdf.png").read_bytes())
    (exp / "experiment.json").write_text(json.dumps(
        {"experiment": "load", "title": "offered load from 0.5x to 2x", "quick": True, "seeds": [0, 1],
         "policies": ["fifo", "srtf"], "command": "hrlsched experiment load --quick", "version": "9.9.9",
         "settings": [{"factor": "load", "value": 0.5, "scenario": "default", "overrides": []}]}))
    html = render(exp)
    check_page(html, 1)
    assert kind_of(exp) == "experiment"
    assert "Experiment: load" in html and "offered load from 0.5x to 2x" in html
    assert "<code>hrlsched experiment load --quick</code>" in html and "hrlsched 9.9.9" in html
    assert "<dt>seeds</dt><dd>0-1</dd>" in html and "<dt>policies</dt><dd>fifo, srtf</dd>" in html
    assert 'data-value="100.5"' in html and "load-load.png" in html and '"overrides": []' in html
    # summary.md's table is a table, its marks gone, its link text only
    assert '<th scope="col">policy</th>' in html and '<td class="num">0.03 ± 0.01</td>' in html
    assert "<strong>avg JCT (h)</strong>" in html and "See the docs." in html and "example.org" not in html


def test_unknown_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ReportError) as e:
        render(tmp_path)
    msg = str(e.value)
    assert str(tmp_path) in msg
    for expected in ("summary.json and config.yaml", "comparison.csv", "evaluation.json", "results.csv"):
        assert expected in msg
    r = CliRunner().invoke(app, ["report", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "no such directory" in r.output
    r = CliRunner().invoke(app, ["report", str(tmp_path / "notes.txt")])
    assert r.exit_code == 2 and "notes.txt: is a file" in r.output
    (tmp_path / "evaluation.json").write_text("{not json")
    r = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert r.exit_code == 2 and "evaluation.json: cannot be read as JSON" in r.output
    assert not (tmp_path / "report.html").exists()


def test_text_is_escaped(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "results.csv").write_text('policy,seed\n"<script>alert(1)</script>",0\n')
    html = render(exp)
    assert "<script>" not in html and "&lt;script&gt;" in html
