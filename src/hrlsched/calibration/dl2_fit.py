"""Fitting the Optimus speed function to parameter-server measurements.

Optimus (Peng et al., EuroSys'18, Sec. 3.2) models the time of one iteration
of a synchronous PS job with w workers and p parameter servers as

    t(w, p) = theta0 * M / w + theta1 + theta2 * w / p + theta3 * w + theta4 * p

(M: global batch) and fits theta >= 0 by non-negative least squares on a few
measured (w, p, speed) points; the asynchronous form is
t(w, p) = theta0 * m + theta1 + theta2 * w / p + theta3 * w + theta4 * p for
one worker's step on its own mini-batch m, and the job's speed is w * m / t.

Input here: the DL2 measurements (``dl2/config_speed.txt`` of
pengyanghua/DL2), one Python tuple per line,
``(model, 'dist_sync', global_batch, num_ps, num_workers, [per-worker
samples/s], [ps cpu cores], [worker cpu cores])``. The job's speed is the sum
of its workers' samples/s; with a global batch M, one iteration takes
M / speed seconds, the quantity fitted. Runs with any worker at speed 0
(failed) are dropped. We minimise the relative error of t (each row weighted
by 1/t), which is what the MAPE of the speed measures.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import nnls


@dataclass(frozen=True)
class SpeedSample:
    model: str
    mode: str  # "sync" or "async"
    batch: int
    n_ps: int
    n_workers: int
    speed: float  # samples/s of the whole job
    ps_cores: float  # mean CPU cores used by one PS
    worker_cores: float  # mean CPU cores used by one worker
    line: int


@dataclass
class ModelFit:
    model: str
    theta: np.ndarray
    mape: float  # mean absolute percentage error of the speed, in %
    n_points: int
    ps_cores: float
    worker_cores: float


@dataclass
class CalibrationResult:
    fits: dict[str, ModelFit]
    dropped: int  # failed runs (a speed of 0)
    source: str
    notes: list[str] = field(default_factory=list)

    @property
    def mape(self) -> dict[str, float]:
        return {m: f.mape for m, f in self.fits.items()}


def read_dl2(path: str | Path) -> tuple[list[SpeedSample], int]:
    """Samples of a DL2 ``config_speed.txt``; returns (samples, failed runs dropped)."""
    path = Path(path)
    out: list[SpeedSample] = []
    dropped = 0
    for no, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{no}"
        try:
            rec = ast.literal_eval(line)
        except (ValueError, SyntaxError):
            raise ValueError(f"{where}: expected a Python tuple literal, got {line[:60]!r}") from None
        if not isinstance(rec, tuple) or len(rec) != 8:
            raise ValueError(f"{where}: expected a tuple of 8 fields (model, mode, global_batch, num_ps, "
                             f"num_workers, [speeds], [ps cores], [worker cores])")
        model, mode, batch, n_ps, n_w, speeds, ps_c, w_c = rec
        names = ("model", "mode", "global_batch", "num_ps", "num_workers")
        for name, val, typ in zip(names, (model, mode, batch, n_ps, n_w), (str, str, int, int, int)):
            if not isinstance(val, typ):
                raise ValueError(f"{where}: field {name}: expected {typ.__name__}, got {val!r}")
        if mode not in ("dist_sync", "dist_async"):
            raise ValueError(f"{where}: field mode: expected 'dist_sync' or 'dist_async', got {mode!r}")
        if batch < 1 or n_ps < 1 or n_w < 1:
            raise ValueError(f"{where}: global_batch, num_ps and num_workers must be >= 1")
        for name, lst, n in (("worker speeds", speeds, n_w), ("worker cpu cores", w_c, n_w), ("ps cpu cores", ps_c, n_ps)):
            if not isinstance(lst, list) or not all(isinstance(x, (int, float)) for x in lst):
                raise ValueError(f"{where}: field {name}: expected a list of numbers")
            if name != "ps cpu cores" and len(lst) != n:
                raise ValueError(f"{where}: field {name}: expected {n} values (num_workers), got {len(lst)}")
        if any(s <= 0 for s in speeds):
            dropped += 1
            continue
        out.append(SpeedSample(model, "sync" if mode == "dist_sync" else "async", batch, n_ps, n_w,
                               float(sum(speeds)), float(np.mean(ps_c)) if ps_c else 0.0, float(np.mean(w_c)), no))
    return out, dropped


def design_matrix(batch: np.ndarray, w: np.ndarray, p: np.ndarray, sync: bool = True) -> np.ndarray:
    """Columns multiplying theta0..theta4 in t(w, p)."""
    w = np.asarray(w, float)
    p = np.asarray(p, float)
    local = np.asarray(batch, float) / w if sync else np.asarray(batch, float)
    return np.column_stack([local, np.ones_like(w), w / p, w, p])


def fit_theta(batch: np.ndarray, w: np.ndarray, p: np.ndarray, speed: np.ndarray, sync: bool = True) -> np.ndarray:
    """theta >= 0 minimising the relative error of the iteration time."""
    batch, speed = np.asarray(batch, float), np.asarray(speed, float)
    t = batch / speed if sync else np.asarray(w, float) * batch / speed
    A = design_matrix(batch, w, p, sync)
    theta, _ = nnls(A / t[:, None], np.ones_like(t))
    return theta


def predict_speed(theta: np.ndarray, batch: np.ndarray, w: np.ndarray, p: np.ndarray, sync: bool = True) -> np.ndarray:
    t = design_matrix(batch, w, p, sync) @ np.asarray(theta, float)
    batch = np.asarray(batch, float)
    return batch / t if sync else np.asarray(w, float) * batch / t


def mape(pred: np.ndarray, actual: np.ndarray) -> float:
    return float(100.0 * np.mean(np.abs(pred - actual) / actual))


def calibrate(samples: list[SpeedSample], dropped: int = 0, source: str = "") -> CalibrationResult:
    groups: dict[tuple[str, str], list[SpeedSample]] = defaultdict(list)
    for s in samples:
        groups[(s.model, s.mode)].append(s)
    fits: dict[str, ModelFit] = {}
    for (model, mode), rows in sorted(groups.items()):
        b = np.array([r.batch for r in rows], float)
        w = np.array([r.n_workers for r in rows], float)
        p = np.array([r.n_ps for r in rows], float)
        v = np.array([r.speed for r in rows], float)
        sync = mode == "sync"
        theta = fit_theta(b, w, p, v, sync)
        key = model if sync else f"{model}:async"
        fits[key] = ModelFit(key, theta, mape(predict_speed(theta, b, w, p, sync), v), len(rows),
                             float(np.mean([r.ps_cores for r in rows])), float(np.mean([r.worker_cores for r in rows])))
    return CalibrationResult(fits, dropped, source)


def calibrate_dl2(path: str | Path) -> CalibrationResult:
    samples, dropped = read_dl2(path)
    if not samples:
        raise ValueError(f"{path}: no usable measurement (all lines empty or failed runs)")
    return calibrate(samples, dropped, str(path))


def dl2_figures(data_dir: str | Path) -> dict[str, float]:
    """Named fidelity figures of the DL2 calibration (for ``validate-perf``)."""
    res = calibrate_dl2(Path(data_dir) / "dl2" / "config_speed.txt")
    figs = {f"dl2_mape_pct.{m}": round(v, 2) for m, v in res.mape.items()}
    figs["dl2_mape_pct.max"] = round(max(res.mape.values()), 2)
    return figs
