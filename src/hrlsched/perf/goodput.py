"""Pollux applications: measured throughput by placement and statistical
efficiency from the gradient noise scale.

Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI'21, Sec. 3.1) measures the progress of
a job in steps at its initial batch size m0: a step at batch m makes
``gain = (var + sqr) / (var / s + sqr)`` such steps, s = m / m0, with
``sqr``/``var`` the squared norm and the variance of the gradient (the
gradient noise scale). Its simulator replays, per application, measured step
times by placement (``placements.csv``, ``scalability.csv``) and per-epoch
gradient statistics at several batch sizes (``validation-<batch>.csv``).

This module reads those files (validated: a bad row is named by file, line
and field) and answers what our engine needs, with the same rules as the
Pollux authors' simulator (``simulator/applications.py`` and the ``Job``
model of ``simulator/simulator.py`` of petuum/adaptdl, branch osdi21-artifact):

- ``get_throughput(placement, local_bsz)``: a measured placement (GPUs per
  node, rotated to its smallest rotation) is interpolated linearly over the
  local batch; an unmeasured one over (nodes, replicas, local batch) in the
  per-(nodes, replicas, local batch) means of all placements plus the
  scalability table (Delaunay-linear, as scipy's LinearNDInterpolator:
  ``hrlsched.perf.linear_nd``).
- ``batch_config(replicas, batch)``: local batch split into gradient
  accumulation steps when it exceeds the largest local batch measured.
- progress to complete a job: the progress at the end of ``max_epochs``
  (the minimum over batch sizes, as Pollux's ``get_progress``); progress is
  counted in steps at the initial batch size. In our engine's units (samples
  x statistical efficiency) that is progress x m0.

Parsing the CSV files and triangulating takes longer than a simulation, so
``load_pollux_applications`` keeps the parsed tables and the triangulations in
a cache file keyed by the content of the files it reads (see ``cache_dir``).
"""

from __future__ import annotations

import bisect
import csv
import hashlib
import importlib.util
import io
import json
import math
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from hrlsched.io import atomic_write
from hrlsched.perf.linear_nd import LinearND, Triangulation

# Per-application settings of the Pollux simulator's APPLICATIONS table.
POLLUX_APPS: dict[str, dict[str, int]] = {
    "bert": {"max_epochs": 2},
    "cifar10": {"max_epochs": 100},
    "ncf": {"max_epochs": 10},
    "imagenet": {"max_epochs": 90},
    "deepspeech2": {"max_epochs": 80},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}


def default_traces_dir() -> Path:
    env = os.environ.get("HRLSCHED_DATA")
    base = Path(env) if env else Path.cwd().parent / "shared" / "data"
    return base / "pollux" / "traces"


def read_table(path: Path, columns: list[str], kinds: list[type]) -> dict[str, np.ndarray]:
    """A CSV with exactly ``columns`` (in order), each value of its kind."""
    try:
        fh = open(path, newline="")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    with fh:
        rows = list(csv.reader(fh))
    if not rows or [c.strip() for c in rows[0]] != columns:
        raise ValueError(f"{path}:1: expected the header {','.join(columns)}, got {','.join(rows[0]) if rows else '(empty)'}")
    out: list[list[object]] = [[] for _ in columns]
    for no, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(columns):
            raise ValueError(f"{path}:{no}: expected {len(columns)} fields ({','.join(columns)}), got {len(row)}")
        for k, (col, kind, raw) in enumerate(zip(columns, kinds, row)):
            try:
                v = kind(raw.strip())
            except ValueError:
                raise ValueError(f"{path}:{no}: field {col}: expected {kind.__name__}, got {raw!r}") from None
            if kind is float and not math.isfinite(v):
                raise ValueError(f"{path}:{no}: field {col}: expected a finite number, got {raw!r}")
            out[k].append(v)
    return {c: np.asarray(v) for c, v in zip(columns, out)}


def read_placements(path: str | Path) -> dict[str, np.ndarray]:
    """``placement,local_bsz,step_time,sync_time``; adds num_nodes, num_replicas."""
    path = Path(path)
    t = read_table(path, ["placement", "local_bsz", "step_time", "sync_time"], [str, int, float, float])
    for i, p in enumerate(t["placement"]):
        if not p.isdigit() or "0" in p:
            raise ValueError(f"{path}:{i + 2}: field placement: expected digits 1-9 (GPUs per node), got {p!r}")
    t["num_nodes"] = np.array([len(p) for p in t["placement"]])
    t["num_replicas"] = np.array([sum(map(int, p)) for p in t["placement"]])
    return t


def read_scalability(path: str | Path) -> dict[str, np.ndarray]:
    return read_table(Path(path), ["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"],
                      [int, int, int, float, float])


def read_validation(path: str | Path) -> dict[str, np.ndarray]:
    return read_table(Path(path), ["progress", "iteration", "metric", "grad_sqr", "grad_var"],
                      [float, int, float, float, float])


def canonical_rotation(counts: tuple[int, ...]) -> tuple[int, ...]:
    counts = tuple(c for c in counts if c)
    return min(counts[i:] + counts[:i] for i in range(len(counts)))


@dataclass(eq=False)
class PolluxApplication:
    name: str
    placements: dict[str, np.ndarray]
    scalability: dict[str, np.ndarray]
    validation: dict[int, dict[str, np.ndarray]]
    max_epochs: int
    init_batch_size: int = 0
    max_batch_size: int = 0
    min_local_bsz: int = 0
    max_local_bsz: int = 0
    # Triangulation of the (nodes, replicas, local batch) points: computed (scipy) when not given.
    triangulation: Triangulation | None = field(default=None, repr=False)
    _by_placement: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    _interp: LinearND | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        p = self.placements
        self.init_batch_size = self.init_batch_size or min(self.validation)
        self.max_batch_size = self.max_batch_size or max(self.validation)
        self.min_local_bsz = self.min_local_bsz or int(p["local_bsz"].min())
        self.max_local_bsz = self.max_local_bsz or int(p["local_bsz"].max())
        self.max_epochs = min(self.max_epochs, min(len(v["progress"]) for v in self.validation.values()))
        # Rows of each placement, by local batch (ties in file order: lexsort is stable).
        order = np.lexsort((p["local_bsz"], p["placement"]))
        pids = p["placement"][order]
        lbs = p["local_bsz"][order].astype(float)
        both = np.column_stack([p["step_time"], p["sync_time"]])[order]
        cuts = np.flatnonzero(pids[1:] != pids[:-1]) + 1
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(pids)].tolist()) if len(pids) else ():
            self._by_placement[str(pids[a])] = (lbs[a:b], both[a:b])
        # Means per (nodes, replicas, local batch), plus the scalability rows.
        keys = np.column_stack([p["num_nodes"], p["num_replicas"], p["local_bsz"]])
        uk, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.ravel()
        cnt = np.bincount(inv).astype(float)
        ys = np.column_stack([np.bincount(inv, p["step_time"]) / cnt, np.bincount(inv, p["sync_time"]) / cnt])
        s = self.scalability
        xs = np.vstack([uk, np.column_stack([s["num_nodes"], s["num_replicas"], s["local_bsz"]])]).astype(float)
        ys = np.vstack([ys, np.column_stack([s["step_time"], s["sync_time"]])])
        self._interp = LinearND(xs, ys, self.triangulation)
        self.triangulation = self._interp.tri
        # epoch_of as one bisection: the max over batch sizes of the epochs reached is a step
        # function of progress that can only change at a progress value of some table.
        progs = [v["progress"] for v in self.validation.values()]
        if all(np.all(np.diff(pr) >= 0) for pr in progs):
            at = np.unique(np.concatenate(progs))
            self._epoch_at: tuple[list[float], list[int]] | None = (
                at.tolist(), np.max([np.searchsorted(pr, at, side="right") for pr in progs], axis=0).tolist())
        else:
            self._epoch_at = None

    # -------------------------------------------------------- throughput
    @lru_cache(maxsize=65536)  # noqa: B019 - applications live as long as the process
    def get_throughput(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """(step_time, sync_time) in seconds at one GPU-per-node placement."""
        pl = canonical_rotation(placement)
        pid = "".join(map(str, pl))
        hit = self._by_placement.get(pid)
        if hit is not None:
            xs, ys = hit
            if xs[0] - 1e-9 <= local_bsz <= xs[-1] + 1e-9:
                return (float(np.interp(local_bsz, xs, ys[:, 0])), float(np.interp(local_bsz, xs, ys[:, 1])))
        nodes = min(len(pl), 16)
        v = self._interp([nodes, sum(pl), local_bsz])[0]
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{self.name}: no measurement near placement {pid} at local batch {local_bsz}")
        return float(v[0]), float(v[1])

    @lru_cache(maxsize=65536)  # noqa: B019
    def batch_config(self, replicas: int, batch_size: int) -> tuple[int, int, int]:
        """(atomic local batch, accumulation steps, actual global batch), as Pollux's update_local_bsz."""
        local = math.ceil(batch_size / replicas - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and batch_size > self.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        atomic = min(atomic, int(self.max_batch_size / (replicas * (accum + 1))))
        return atomic, accum, replicas * atomic * (accum + 1)

    @lru_cache(maxsize=65536)  # noqa: B019
    def step_time(self, placement: tuple[int, ...], batch_size: int, compute_scale: float = 1.0) -> tuple[float, int]:
        """Seconds per step (with accumulation) and the actual global batch.
        ``compute_scale`` multiplies the compute part (step - sync) of every
        micro-step: other GPUs than the measured ones."""
        replicas = sum(placement)
        atomic, accum, actual = self.batch_config(replicas, batch_size)
        step, sync = self.get_throughput(tuple(placement), float(atomic))
        if compute_scale != 1.0:
            return sync + (step - sync) * (accum + 1) * compute_scale, actual
        return step + (step - sync) * accum, actual

    # ------------------------------------------------------- efficiency
    @lru_cache(maxsize=4096)  # noqa: B019
    def progress_at_epoch(self, epoch: int) -> float:
        if epoch <= 0:
            return 0.0
        return float(min(v["progress"][epoch - 1] for v in self.validation.values()))

    @property
    def total_progress(self) -> float:
        """Progress (steps at the initial batch) to finish: the end of max_epochs."""
        return self.progress_at_epoch(self.max_epochs)

    def epoch_of(self, progress: float) -> int:
        if self._epoch_at is not None:
            at, epochs = self._epoch_at
            i = bisect.bisect_right(at, progress) - 1
            return epochs[i] if i >= 0 else 0
        return max(int(np.searchsorted(v["progress"], progress, side="right")) for v in self.validation.values())

    @lru_cache(maxsize=65536)  # noqa: B019
    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        bs = sorted(self.validation)
        lo = max((b for b in bs if b <= batch_size), default=bs[0])
        hi = min((b for b in bs if b >= batch_size), default=bs[-1])
        e = min(epoch, min(len(self.validation[b]["grad_sqr"]) for b in (lo, hi)) - 1)
        ls, lv = self.validation[lo]["grad_sqr"][e], self.validation[lo]["grad_var"][e]
        if lo == hi:
            return float(ls), float(lv)
        us, uv = self.validation[hi]["grad_sqr"][e], self.validation[hi]["grad_var"][e]
        f = (batch_size - lo) / (hi - lo)
        return float(ls + f * (us - ls)), float(lv + f * (uv - lv))

    def gain(self, batch_size: float, progress: float) -> float:
        """Steps at the initial batch that one step at ``batch_size`` is worth."""
        return self.gain_at_epoch(batch_size, self.epoch_of(progress))

    def gain_at_epoch(self, batch_size: float, epoch: int) -> float:
        sqr, var = self.grad_stats(batch_size, epoch)
        scale = batch_size / self.init_batch_size
        return (var + sqr) / (var / scale + sqr)

    def samples_to_complete(self, batch_size: int | None = None) -> float:
        """Work to finish in the engine's units (samples x efficiency): the
        progress at the end of max_epochs times the initial batch. (Without a
        target metric, completion does not depend on the batch size.)"""
        return self.total_progress * self.init_batch_size


def load_pollux_application(trace_dir: str | Path, triangulation: Triangulation | None = None,
                            **overrides: int) -> PolluxApplication:
    d = Path(trace_dir)
    validation = {}
    for f in sorted(d.glob("validation-*.csv")):
        try:
            bs = int(f.stem.split("-")[-1])
        except ValueError:
            raise ValueError(f"{f}: expected a name validation-<batch size>.csv") from None
        validation[bs] = read_validation(f)
    if not validation:
        raise FileNotFoundError(f"{d}: no validation-<batch>.csv files")
    return _application(d.name, read_placements(d / "placements.csv"), read_scalability(d / "scalability.csv"),
                        validation, triangulation, **overrides)


def _application(name: str, placements: dict[str, np.ndarray], scalability: dict[str, np.ndarray],
                 validation: dict[int, dict[str, np.ndarray]], triangulation: Triangulation | None = None,
                 **overrides: int) -> PolluxApplication:
    settings = {**POLLUX_APPS.get(name, {}), **overrides}
    return PolluxApplication(
        name=name,
        placements=placements,
        scalability=scalability,
        validation=validation,
        max_epochs=int(settings.get("max_epochs", 10**9)),
        max_local_bsz=int(settings.get("max_local_bsz", 0)),
        triangulation=triangulation,
    )


# ---------------------------------------------------------------- cache
# Bump when the cached arrays or their meaning change.
_CACHE_FORMAT = 3
_NO_CACHE = ("", "0", "off", "none", "no")


def cache_dir() -> Path | None:
    """Where parsed traces are kept: ``$HRLSCHED_CACHE_DIR`` (empty or ``off``: no cache),
    else ``$XDG_CACHE_HOME/hrlsched``, else ``~/.cache/hrlsched``."""
    env = os.environ.get("HRLSCHED_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in _NO_CACHE else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hrlsched"


def _app_dirs(d: Path) -> list[Path]:
    return [p for p in sorted(d.iterdir()) if (p / "placements.csv").exists()]


def _trace_files(app_dir: Path) -> list[Path]:
    return [app_dir / "placements.csv", app_dir / "scalability.csv", *sorted(app_dir.glob("validation-*.csv"))]


def _scipy_version() -> bytes:
    """scipy's version file, read without importing scipy: another qhull may triangulate
    the degenerate grids otherwise, so a cache entry holds for the scipy that made it."""
    spec = importlib.util.find_spec("scipy")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        f = Path(loc) / "version.py"
        if f.exists():
            return f.read_bytes()
    return b"no scipy version file"


def _content_key(d: Path) -> str:
    """Digest of every file the loader reads (names and bytes) and of the cache format."""
    h = hashlib.blake2b(f"pollux-traces/{_CACHE_FORMAT}".encode(), digest_size=16)
    h.update(_scipy_version())
    for app in _app_dirs(d):
        for f in _trace_files(app):
            data = f.read_bytes()
            h.update(f"\0{app.name}/{f.name}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def _to_arrays(apps: dict[str, PolluxApplication]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, app in apps.items():
        for col, v in app.placements.items():
            out[f"{name}/placements/{col}"] = v
        for col, v in app.scalability.items():
            out[f"{name}/scalability/{col}"] = v
        for bs, table in app.validation.items():
            for col, v in table.items():
                out[f"{name}/validation/{bs}/{col}"] = v
        assert app.triangulation is not None
        for a in Triangulation.ARRAYS:
            out[f"{name}/triangulation/{a}"] = getattr(app.triangulation, a)
    return out


def _from_arrays(arrays: dict[str, np.ndarray]) -> dict[str, PolluxApplication]:
    parts: dict[str, dict[str, dict]] = {}
    for key, v in arrays.items():
        name, kind, *rest = key.split("/")
        node = parts.setdefault(name, {}).setdefault(kind, {})
        if kind == "validation":
            node.setdefault(int(rest[0]), {})[rest[1]] = v
        else:
            node[rest[0]] = v
    return {name: _application(name, p["placements"], p["scalability"], p["validation"],
                               Triangulation(**{a: p["triangulation"][a] for a in Triangulation.ARRAYS}))
            for name, p in sorted(parts.items())}


def _pack(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Many small arrays as a few pools (one per dtype kind) and a JSON index: reading an
    .npz costs per member, so a few large members read far faster than hundreds."""
    pools: dict[str, list[np.ndarray]] = {"f": [], "i": [], "U": []}
    used = dict.fromkeys(pools, 0)
    index = {}
    for key, v in arrays.items():
        kind = v.dtype.kind if v.dtype.kind in pools else None
        if kind is None:
            raise TypeError(f"{key}: cannot cache arrays of dtype {v.dtype}")
        index[key] = [kind, list(v.shape), used[kind]]
        pools[kind].append(v.ravel())
        used[kind] += v.size
    out = {"index": np.frombuffer(json.dumps(index).encode(), dtype=np.uint8)}
    for kind, vs in pools.items():
        out[kind] = np.concatenate(vs) if vs else np.array([], dtype={"f": float, "i": np.int64, "U": str}[kind])
    return out


def _unpack(z: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    index = json.loads(bytes(z["index"]).decode())
    pools = {kind: z[kind] for kind in ("f", "i", "U")}
    out = {}
    for key, (kind, shape, start) in index.items():
        n = math.prod(shape)
        out[key] = pools[kind][start:start + n].reshape(shape)
    return out


def _read_cache(path: Path) -> dict[str, PolluxApplication] | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            return _from_arrays(_unpack(z))
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        return None  # absent, unreadable or from another layout: parse the traces again


def _write_cache(path: Path, apps: dict[str, PolluxApplication]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **_pack(_to_arrays(apps)))
    try:
        atomic_write(path, lambda p: p.write_bytes(buf.getvalue()))
    except OSError:
        pass  # a read-only cache folder only costs the next run the parse


_LOADED: dict[Path, dict[str, PolluxApplication]] = {}


def load_pollux_applications(traces_dir: str | Path | None = None) -> dict[str, PolluxApplication]:
    """Every application folder under ``traces_dir`` (cached per folder in the process, and on
    disk under ``cache_dir()`` keyed by the files' content)."""
    d = Path(traces_dir) if traces_dir is not None else default_traces_dir()
    d = d.resolve()
    if d not in _LOADED:
        if not d.is_dir():
            raise FileNotFoundError(
                f"{d}: Pollux traces not found; point HRLSCHED_DATA (or perf.options.traces_dir) at the data "
                f"folder (see ../shared/data/SOURCES.md: petuum/adaptdl, branch osdi21-artifact, simulator/traces)"
            )
        cdir = cache_dir()
        path = cdir / f"pollux-traces-{_content_key(d)}.npz" if cdir is not None else None
        apps = _read_cache(path) if path is not None else None
        if apps is None:
            apps = {p.name: load_pollux_application(p) for p in _app_dirs(d)}
            if path is not None:
                _write_cache(path, apps)
        _LOADED[d] = apps
    return _LOADED[d]
