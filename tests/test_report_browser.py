"""A comparison's report opened in a real headless browser: Chromium from
the system's packages (Debian's ``chromium``; ``.ci/run`` installs it where
it is missing), driven by Playwright through ``executable_path`` (never a
browser Playwright downloads). The page must load with no console error
and no request beyond itself, every plot must decode, the page must not
scroll sideways at laptop width, and its main table must hold the
comparison's own figures (comparison.csv). A second test renders the page
with ``chromium --headless --screenshot``, the browser's own command line.
Each skips, saying why, only where its browser or driver cannot be had."""

from __future__ import annotations

import csv
import math
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from hrlsched.report.render import write_report
from tests.helpers import tiny_comparison

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
LAPTOP = {"width": 1366, "height": 900}
NUMBER = re.compile(r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?")


def chromium() -> str:
    """The system's Chromium, or a skip saying how to install it."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium on PATH (looked for " + ", ".join(BROWSERS) + "); on Debian: "
                "apt-get install -y chromium (.ci/run installs it where it is missing)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tiny_comparison(tmp_path_factory.mktemp("browser") / "cmp")
    return write_report(out)


def numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in NUMBER.findall(text)]


def close(shown: float, value: float) -> bool:
    """``shown`` is ``value`` to the four significant digits the page prints."""
    return math.isclose(shown, value, rel_tol=6e-4, abs_tol=1e-9) or abs(shown - value) <= 0.5


def open_page(path: Path, scripts: dict[str, str]) -> tuple[list[str], list[str], dict]:
    """Open ``path`` in the system's Chromium at laptop width: the console
    errors and warnings, page errors and failed requests; every request's
    URL; and each of ``scripts`` evaluated on the loaded page, by name."""
    browser_path = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed (make install brings it with the dev extras)")
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path)
        try:
            page = browser.new_page(viewport=LAPTOP)
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri(), wait_until="load")
            got = {name: page.evaluate(js) for name, js in scripts.items()}
            got["title"] = page.title()
        finally:
            browser.close()
    return problems, requests, got


IMAGES = """() => Promise.all([...document.images].map(
    img => img.decode().then(() => [img.naturalWidth, img.naturalHeight],
                             e => [0, 0, img.src.slice(0, 60) + ': ' + e])))"""
OVERFLOW = "() => document.documentElement.scrollWidth - window.innerWidth"


def test_comparison_report_in_chromium(report: Path) -> None:
    problems, requests, got = open_page(report, {"sizes": IMAGES, "overflow": OVERFLOW, "table": """() => {
                const t = document.getElementById('main-table');
                return {
                  heads: [...t.tHead.rows[0].cells].map(
                    c => [c.dataset.key || null, parseFloat(c.dataset.scale || '1'), c.innerText]),
                  rows: [...t.tBodies[0].rows].map(r => [...r.cells].map(c => [c.innerText, c.dataset.value ?? null])),
                };
            }"""})
    sizes, overflow, table, title = got["sizes"], got["overflow"], got["table"], got["title"]
    assert not problems, problems
    assert all(u == report.as_uri() or u.startswith("data:") for u in requests), requests
    assert title == "Comparison: default"
    assert len(sizes) == 2 and all(s[0] > 0 and s[1] > 0 for s in sizes), sizes  # jct_cdf.png, utilisation.png
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {LAPTOP['width']} px"

    with open(report.parent / "comparison.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r[0][0] for r in table["rows"]] == [r["policy"] for r in rows]
    keyed = [(i, key, scale) for i, (key, scale, _) in enumerate(table["heads"]) if key]
    for key, scale, label in table["heads"]:  # the unit a column names is the one its figures are in
        if key:
            assert scale == {"(h)": 3600, "(%)": 0.01}.get(label[label.rfind("("):], 1), (key, scale, label)
    assert {key for _, key, _ in keyed} >= {"avg_jct_s", "p95_jct_s", "makespan_s", "gpu_util_mean"}
    checked = 0
    for cells, want in zip(table["rows"], rows):
        for i, key, scale in keyed:
            text, value = cells[i]
            if want[key] == "":
                assert text == "-" and value == "", (want["policy"], key, text)
                continue
            assert float(value) == float(want[key]), (want["policy"], key, value, want[key])
            shown = numbers(text)
            assert shown and close(shown[0], float(want[key]) / scale), (want["policy"], key, text, want[key])
            half = want.get(f"{key}_ci95", "")
            assert ("±" in text) == (half != ""), (want["policy"], key, text)
            checked += 1
    assert checked >= 2 * 10  # every metric of both policies


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    return struct.unpack(">II", head[16:24])


def test_comparison_report_screenshot(report: Path, tmp_path: Path) -> None:
    browser_path = chromium()
    shot = tmp_path / "report.png"
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
    cmd = [browser_path, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
           "--v=0", f"--window-size={LAPTOP['width']},{LAPTOP['height']}", f"--screenshot={shot}", report.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console  # a blocked request or a page error is logged there
    assert png_size(shot) == (LAPTOP["width"], LAPTOP["height"])


def test_experiment_report_in_chromium(tmp_path: Path) -> None:
    """An experiment's folder (what ``hrlsched experiment NAME`` writes), rendered and opened:
    no console error or outside request, every plot decodes, the page fits a laptop's width."""
    chromium()  # a skip, saying why, before the runs where no browser can be had
    from hrlsched.experiments.experiment import Experiment, Factor, run_experiment

    tiny = Experiment(
        "tiny", "a tiny load sweep",
        (Factor("load", "offered load", (0.5, 1.0), (0.5, 1.0),
                lambda v: ("default", ["workload.jobs=8", f"workload.duration_h={1 / v:g}"]), reference=1.0),),
        policies=("fifo", "srtf"), seeds=(0,), quick_seeds=(0,), bound=True, plots=("sweep", "main"),
        cdf_policies=("fifo", "srtf"))
    out = tmp_path / "exp"
    run_experiment(tiny, out, quick=True, workers=1)
    page_path = write_report(out)
    problems, requests, got = open_page(page_path, {"sizes": IMAGES, "overflow": OVERFLOW,
                                                    "text": "() => document.body.innerText"})
    sizes, overflow, text = got["sizes"], got["overflow"], got["text"]
    assert not problems, problems
    assert all(u == page_path.as_uri() or u.startswith("data:") for u in requests), requests
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(sizes) >= len(pngs) >= 3 and all(w > 0 and h > 0 for w, h in sizes), (sizes, pngs)
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px"
    assert "srtf" in text and "fifo" in text
