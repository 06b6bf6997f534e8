"""The measured backend without scipy at run time: the Delaunay-linear
interpolation gives scipy's values, and the parsed traces come back from the
cache only while the files are unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hrlsched.perf import goodput
from hrlsched.perf.linear_nd import LinearND
from tests.test_measured_backend import make_app


def _queries(points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    lo, hi = points.min(axis=0), points.max(axis=0)
    grid = np.stack(np.meshgrid(*[np.linspace(a, b, 9) for a, b in zip(lo, hi)]), axis=-1).reshape(-1, points.shape[1])
    return np.vstack([points, grid.round(), grid, rng.uniform(lo - 1, hi + 1, size=(300, points.shape[1]))])


def _same_as_scipy(points: np.ndarray, values: np.ndarray, queries: np.ndarray) -> None:
    from scipy.interpolate import LinearNDInterpolator

    ref = LinearNDInterpolator(points, values)
    mine = LinearND(points, values)
    for q in (queries, queries[:1], queries[::-1]):  # several points per call, and one
        r, m = ref(q), mine(q)
        assert np.array_equal(np.isnan(r), np.isnan(m))
        ok = ~np.isnan(r)
        np.testing.assert_allclose(m[ok], r[ok], rtol=1e-12, atol=1e-12)


def test_degenerate_grid_matches_scipy() -> None:
    # Integer grid points, as in the Pollux tables: qhull returns flat simplices, where a
    # point can sit in several simplices of different values; the search must pick scipy's.
    rng = np.random.default_rng(1)
    nodes, reps, lbs = np.meshgrid([1, 2, 4], [1, 2, 4, 8], [8, 16, 32, 64])
    pts = np.column_stack([nodes.ravel(), reps.ravel(), lbs.ravel()]).astype(float)
    pts = pts[pts[:, 1] >= pts[:, 0]]
    vals = np.column_stack([0.01 * pts[:, 2] / pts[:, 1] + rng.uniform(0, 0.05, len(pts)), rng.uniform(size=len(pts))])
    _same_as_scipy(pts, vals, _queries(pts, rng))


def test_pollux_interpolation_matches_scipy(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRLSCHED_CACHE_DIR", "off")
    rng = np.random.default_rng(0)
    for name in ("cifar10", "ncf"):
        app = goodput.load_pollux_application(shared_data / "pollux" / "traces" / name)
        pts, vals = app._interp.points, app._interp.values
        _same_as_scipy(pts, vals, _queries(pts, rng)[::7])


def _throughputs(apps: dict[str, goodput.PolluxApplication]) -> list[tuple[float, float]]:
    return [apps["toy"].get_throughput(pl, lb) for pl in ((1,), (2,), (1, 1), (1,) * 4, (1,) * 6, (1,) * 8) for lb in (8.0, 12.0, 32.0)]


def test_cache_round_trip_and_invalidation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = make_app(tmp_path / "traces")
    cache = tmp_path / "cache"
    monkeypatch.setenv("HRLSCHED_CACHE_DIR", str(cache))
    monkeypatch.setattr(goodput, "_LOADED", {})
    fresh = goodput.load_pollux_applications(traces)
    files = list(cache.glob("pollux-traces-*.npz"))
    assert len(files) == 1
    monkeypatch.setattr(goodput, "_LOADED", {})
    cached = goodput.load_pollux_applications(traces)
    assert cached["toy"] is not fresh["toy"]
    assert _throughputs(cached) == _throughputs(fresh)
    for a, b in ((fresh["toy"], cached["toy"]),):
        assert (a.init_batch_size, a.max_batch_size, a.max_epochs, a.total_progress) == \
               (b.init_batch_size, b.max_batch_size, b.max_epochs, b.total_progress)
        assert a.gain(64, 150.0) == b.gain(64, 150.0)
        assert list(a.placements["placement"]) == list(b.placements["placement"])

    # A changed file is a new key: parsed again, not served from the old entry.
    f = traces / "toy" / "placements.csv"
    f.write_text(f.read_text().replace("1,8,0.13", "1,8,0.5", 1))
    monkeypatch.setattr(goodput, "_LOADED", {})
    changed = goodput.load_pollux_applications(traces)
    assert changed["toy"].get_throughput((1,), 8.0)[0] == pytest.approx(0.5)
    assert len(list(cache.glob("pollux-traces-*.npz"))) == 2

    # Another scipy may triangulate otherwise: its entry is its own.
    monkeypatch.setattr(goodput, "_scipy_version", lambda: b"version = '0.0'")
    monkeypatch.setattr(goodput, "_LOADED", {})
    goodput.load_pollux_applications(traces)
    assert len(list(cache.glob("pollux-traces-*.npz"))) == 3

    # A damaged cache file is ignored (and replaced).
    for p in cache.glob("pollux-traces-*.npz"):
        p.write_bytes(b"not an npz")
    monkeypatch.setattr(goodput, "_LOADED", {})
    assert goodput.load_pollux_applications(traces)["toy"].get_throughput((1,), 8.0)[0] == pytest.approx(0.5)


def test_cache_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = make_app(tmp_path / "traces")
    monkeypatch.setenv("HRLSCHED_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(goodput, "_LOADED", {})
    assert goodput.cache_dir() is None
    goodput.load_pollux_applications(traces)
    assert not (tmp_path / "xdg").exists()
    monkeypatch.delenv("HRLSCHED_CACHE_DIR")
    assert goodput.cache_dir() == tmp_path / "xdg" / "hrlsched"
