"""Piecewise-linear interpolation over a Delaunay triangulation, evaluated as
scipy's ``LinearNDInterpolator`` does, from a triangulation that can be stored
and read back.

The measured backend interpolates Pollux step times over (nodes, replicas,
local batch) the way the Pollux authors' simulator does, with scipy's
``LinearNDInterpolator``. Importing ``scipy.interpolate`` and triangulating
costs more than a whole simulation of a Pollux workload, so this module keeps
the arrays of the triangulation (computed once by scipy's qhull ``Delaunay``,
with scipy's default options) and evaluates with plain Python and numpy.

The result must be scipy's, not just a linear interpolant: the grid-like
measurements make qhull return flat (zero-volume) simplices, and a point on
their faces can lie in several simplices whose values differ. So the simplex
is located by the same search as scipy's ``_find_simplex`` (scipy/spatial/
_qhull.pyx): a walk over neighbours towards a positive plane distance of the
point lifted on the paraboloid, from simplex 0 at each call (as
``LinearNDInterpolator`` starts each call), then a directed walk on the signs
of the barycentric coordinates (tolerance ``100 * machine epsilon``), and,
when a flat simplex blocks the walk or it does not converge, the first
simplex in index order that contains the point (next to a flat simplex, its
neighbour with a ``sqrt(machine epsilon)`` leeway towards it). Coordinates are
summed in the same order as there, so values agree to the last bit. A point
outside the hull is NaN.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

_EPS = 100 * float(np.finfo(float).eps)
_EPS_BROAD = float(np.sqrt(np.finfo(float).eps))


def _delaunay() -> type:
    """scipy's Delaunay, its LAPACK loaded single-threaded where this loads it first.

    The barycentric transforms are thousands of 3x3 LAPACK calls; with scipy's OpenBLAS
    starting a thread per core, they stalled for 10 to 90 s on a busy 2-core machine (0.01 s
    with one thread). OpenBLAS reads OPENBLAS_NUM_THREADS when it loads, so the variable is
    set only around the import (a value the user set is kept) and restored after it.
    """
    if "scipy.linalg" in sys.modules:
        from scipy.spatial import Delaunay

        return Delaunay
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from scipy.spatial import Delaunay
    finally:
        if saved is None:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
    return Delaunay


@dataclass(frozen=True)
class Triangulation:
    """What evaluation needs of a ``scipy.spatial.Delaunay`` (its attribute names)."""

    simplices: np.ndarray  # (n, ndim + 1) vertex indices
    neighbors: np.ndarray  # (n, ndim + 1) simplex opposite each vertex, -1 on the hull
    transform: np.ndarray  # (n, ndim + 1, ndim) barycentric transform; NaN for a flat simplex
    equations: np.ndarray  # (n, ndim + 2) facet planes of the points lifted on the paraboloid
    paraboloid: np.ndarray  # (scale, shift) of the lift

    ARRAYS = ("simplices", "neighbors", "transform", "equations", "paraboloid")

    @classmethod
    def of(cls, points: np.ndarray) -> Triangulation:
        """Triangulate with scipy (qhull, the options ``LinearNDInterpolator`` uses): the slow step."""
        tri = _delaunay()(points)
        return cls(np.asarray(tri.simplices, dtype=np.int64), np.asarray(tri.neighbors, dtype=np.int64),
                   np.asarray(tri.transform, dtype=float), np.asarray(tri.equations, dtype=float),
                   np.array([tri.paraboloid_scale, tri.paraboloid_shift], dtype=float))


class LinearND:
    """``f(x)``: linear interpolation of ``values`` (n_points, k) given at ``points`` (n_points, ndim)."""

    def __init__(self, points: np.ndarray, values: np.ndarray, tri: Triangulation | None = None) -> None:
        self.points = np.ascontiguousarray(points, dtype=float)
        self.values = np.ascontiguousarray(values, dtype=float)
        if self.values.ndim == 1:
            self.values = self.values[:, None]
        if self.points.ndim != 2 or len(self.points) != len(self.values):
            raise ValueError(f"points {self.points.shape} and values {self.values.shape} do not match")
        self.tri = tri if tri is not None else Triangulation.of(self.points)
        n, ndim = len(self.tri.simplices), self.points.shape[1]
        if self.tri.transform.shape != (n, ndim + 1, ndim) or (n and int(self.tri.simplices.max()) >= len(self.points)):
            raise ValueError("the triangulation does not belong to these points")
        self.ndim = ndim
        self.lo = self.points.min(axis=0).tolist()
        self.hi = self.points.max(axis=0).tolist()
        self._rows: tuple[dict, dict, dict] = ({}, {}, {})  # transform, neighbors, equations
        self._pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # A walk touches a few simplices: their rows as Python floats beat numpy scalars there.
    def _row(self, rows: dict[int, list], arr: np.ndarray, s: int) -> list:
        r = rows.get(s)
        if r is None:
            r = rows[s] = arr[s].ravel().tolist()
        return r

    def _flat_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each flat simplex s and each of its valid neighbours m, in scipy's order (s, then
        the vertex opposite m): s, m, and which of m's coordinates face s."""
        if self._pairs is None:
            nb = self.tri.neighbors
            flat = np.isnan(self.tri.transform[:, 0, 0])
            s, k = np.nonzero(flat[:, None] & (nb >= 0))
            m = nb[s, k]
            keep = ~flat[m]
            s, m = s[keep], m[keep]
            self._pairs = (s, m, nb[m] == s[:, None])
        return self._pairs

    def _bruteforce(self, x: list[float]) -> tuple[int, list[float] | None]:
        nd, tr = self.ndim, self.tri.transform
        d = np.asarray(x) - tr[:, nd, :]
        c = np.empty((len(tr), nd + 1))
        last = np.ones(len(tr))
        for i in range(nd):
            ci = tr[:, i, 0] * d[:, 0]
            for j in range(1, nd):
                ci = ci + tr[:, i, j] * d[:, j]
            c[:, i] = ci
            last = last - ci
        c[:, nd] = last
        flat = np.isnan(tr[:, 0, 0])
        with np.errstate(invalid="ignore"):
            ok = ((c >= -_EPS) & (c <= 1 + _EPS)).all(axis=1) & ~flat
        first = int(np.argmax(ok)) if ok.any() else len(tr)
        # A flat simplex before the first hit answers with a neighbour, with leeway towards itself.
        fs, fm, towards = self._flat_pairs()
        before = fs < first
        if before.any():
            cm = c[fm[before]]
            lo = np.where(towards[before], -_EPS_BROAD, -_EPS)
            with np.errstate(invalid="ignore"):
                hit = ((cm >= lo) & (cm <= 1 + _EPS)).all(axis=1)
            if hit.any():
                k = int(np.argmax(hit))
                return int(fm[before][k]), cm[k].tolist()
        if first < len(tr):
            return first, c[first].tolist()
        return -1, None

    def _find(self, x: list[float], start: int) -> tuple[int, list[float] | None, int]:
        """(simplex, barycentric coordinates, where the next search starts)."""
        nd = self.ndim
        if any(v < lo - _EPS or v > hi + _EPS for v, lo, hi in zip(x, self.lo, self.hi)):
            return -1, None, start
        tr_rows, nb_rows, eq_rows = self._rows
        tr, nb, eq = self.tri.transform, self.tri.neighbors, self.tri.equations
        nsimp = len(tr)
        if nsimp == 0:
            return -1, None, start
        s = start if 0 <= start < nsimp else 0
        scale, shift = self.tri.paraboloid.tolist()
        z = list(x) + [0.0]
        sq = 0.0
        for v in x:
            sq += v * v
        z[nd] = sq * scale + shift

        def dist(k: int) -> float:
            e = self._row(eq_rows, eq, k)
            d = e[nd + 1]
            for i in range(nd + 1):
                d += e[i] * z[i]
            return d

        best = dist(s)
        changed = True
        while changed and not best > 0:
            changed = False
            for k in range(nd + 1):
                m = self._row(nb_rows, nb, s)[k]
                if m == -1:
                    continue
                dm = dist(m)
                if dm > best + _EPS * (1 + abs(best)):
                    s, best, changed = m, dm, True
        # Directed walk on the signs of the barycentric coordinates.
        for _ in range(1 + nsimp // 4):
            t = self._row(tr_rows, tr, s)
            c = [0.0] * (nd + 1)
            inside = 1
            for k in range(nd + 1):
                if k == nd:
                    v = 1.0
                    for j in range(nd):
                        v -= c[j]
                else:
                    v = 0.0
                    for j in range(nd):
                        v += t[nd * k + j] * (x[j] - t[nd * nd + j])
                c[k] = v
                if v < -_EPS:
                    m = self._row(nb_rows, nb, s)[k]
                    if m == -1:
                        return -1, None, s
                    s, inside = m, -1
                    break
                if not v <= 1 + _EPS:  # also NaN: a flat simplex
                    inside = 0
            if inside == -1:
                continue
            if inside == 1:
                return s, c, s
            s, c2 = self._bruteforce(x)
            return s, c2, s
        s, c2 = self._bruteforce(x)
        return s, c2, s

    def __call__(self, x: object) -> np.ndarray:
        """Values at the points ``x`` (m, ndim) or at one point (ndim,): an (m, k) array, NaN outside."""
        xs = np.atleast_2d(np.asarray(x, dtype=float))
        if xs.shape[1] != self.ndim:
            raise ValueError(f"expected points of {self.ndim} coordinates, got {xs.shape[1]}")
        out = np.full((len(xs), self.values.shape[1]), np.nan)
        simp = self.tri.simplices
        start = 0
        for i, p in enumerate(xs.tolist()):
            s, c, start = self._find(p, start)
            if s < 0 or c is None:
                continue
            row = [0.0] * self.values.shape[1]
            for j, vi in enumerate(simp[s].tolist()):
                for k, v in enumerate(self.values[vi].tolist()):
                    row[k] = row[k] + c[j] * v
            out[i] = row
        return out
