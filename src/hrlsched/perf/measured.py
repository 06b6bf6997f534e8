"""Replay of measured step times (the Pollux ``placements.csv`` format).

A job's model names a Pollux application (bert, cifar10, deepspeech2,
imagenet, ncf, yolov3); its speed at a placement is the measured step time
at that placement's GPUs-per-server pattern and local batch, interpolated
over local batches and over placements that were not measured, with the
rules of the Pollux authors' simulator (see ``hrlsched.perf.goodput``).
Statistical efficiency follows the gradient noise scale measured per epoch,
so progress (samples x efficiency) under a larger batch counts as the
measurements say. The network is what was measured: there is no
interference between jobs in this backend. On other GPU types than the
measured T4, the compute part of each step (step - sync time) is scaled by
the model's speed on T4 over its speed on the job's slowest GPU
(``Topology.type_speed``, as the other backends); the sync time is kept.

Only synchronous training: the measurements are of synchronous all-reduce
jobs, so a job with ``mode: async`` is refused with a ValueError (use the
``analytic`` or ``optimus`` backend for asynchronous jobs). A job with
``arch: ps`` is replayed as the measured all-reduce job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from hrlsched.cluster.gpu_speed import model_speed
from hrlsched.cluster.topology import Topology
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.base import PerformanceModel
from hrlsched.perf.goodput import PolluxApplication, load_pollux_applications

# The GPUs of the Pollux measurements (16 nodes x 4 T4).
MEASURED_GPU_TYPE = "T4"


class MeasuredModel(PerformanceModel):
    name = "measured"
    progress_dependent = True
    prices_everything = False

    def __init__(self, topology: Topology, catalogue: Mapping[str, ModelProfile], traces_dir: str | None = None) -> None:
        super().__init__(topology, catalogue)
        self.apps = load_pollux_applications(Path(traces_dir) if traces_dir else None)
        self._counts: dict[tuple[int, ...], tuple[int, ...]] = {}  # GPUs -> GPUs per server used
        self._efficiency: dict[tuple, float] = {}

    def app(self, job: Job) -> PolluxApplication:
        if job.mode != "sync":
            raise ValueError(
                f"job {job.job_id} ({job.name}): mode {job.mode!r}: the measured backend replays synchronous "
                "all-reduce measurements only; use perf.backend analytic or optimus for asynchronous jobs"
            )
        try:
            return self.apps[job.model]
        except KeyError:
            raise ValueError(
                f"job {job.job_id}: model {job.model!r} has no measured trace; the measured backend knows "
                f"{sorted(self.apps)}"
            ) from None

    def node_counts(self, pl: Placement) -> tuple[int, ...]:
        counts = self._counts.get(pl.gpus)
        if counts is None:
            srv = self.topology.gpu_server[np.asarray(pl.gpus, dtype=np.int64)]
            c = np.bincount(srv)
            counts = self._counts[pl.gpus] = tuple(c[c > 0].tolist())
        return counts

    def speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        batch = [j.batch_size for j in jobs] if batch_sizes is None else np.asarray(batch_sizes).tolist()
        out = np.empty(len(jobs))
        for k, (j, pl, b) in enumerate(zip(jobs, placements, batch)):
            step, actual = self.app(j).step_time(self.node_counts(pl), int(b), self.compute_scale(j, pl))
            out[k] = actual / step
        return out

    def compute_scale(self, job: Job, pl: Placement) -> float:
        """Compute time on the job's GPUs over compute time on the measured
        type (T4): the model's speed on the measured type over its speed on
        the slowest GPU of the placement (``Topology.type_speed``); 1 on T4s."""
        topo = self.topology
        if len(topo.gpu_type_names) == 1 and topo.gpu_type_names[0] == MEASURED_GPU_TYPE:
            return 1.0
        speed = topo.type_speed(job.model)
        slowest = float(speed[topo.gpu_type[np.asarray(pl.gpus, dtype=np.int64)]].min())
        return float(model_speed(job.model, MEASURED_GPU_TYPE, topo.spec.gpu_speed)) / slowest

    def efficiency(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray,
        progress: np.ndarray,
    ) -> np.ndarray:
        out = np.empty(len(jobs))
        memo = self._efficiency
        for k, (j, pl, b, p) in enumerate(zip(jobs, placements, np.asarray(batch_sizes).tolist(),
                                              np.asarray(progress, dtype=float).tolist())):
            app = self.app(j)
            # Efficiency moves only at epoch boundaries: one value per (app, workers, batch, epoch).
            key = (app, len(pl.gpus), b, app.epoch_of(p / app.init_batch_size))
            v = memo.get(key)
            if v is None:
                _, _, actual = app.batch_config(key[1], int(b))
                # gain steps at the initial batch per step of `actual` samples.
                v = memo[key] = app.gain_at_epoch(actual, key[3]) * app.init_batch_size / actual
            out[k] = v
        return out

    def efficiency_until(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray,
        progress: np.ndarray,
    ) -> np.ndarray:
        """The next epoch boundary of each job (efficiency is one value per
        epoch), a hair early so that float rounding never carries a job past it."""
        out = np.empty(len(jobs))
        for k, (j, p) in enumerate(zip(jobs, np.asarray(progress, dtype=float).tolist())):
            app = self.app(j)
            out[k] = app.next_epoch_change(p / app.init_batch_size) * app.init_batch_size * (1 - 1e-9)
        return out

    def measured_work(self) -> dict[str, Callable[[int], float]]:
        return {name: app.samples_to_complete for name, app in self.apps.items()}

    def isolated_speed(self, job: Job, n_workers: int, n_ps: int, batch_size: int | None = None) -> float:
        """Alone on the fewest servers (the measurements have no neighbours)."""
        per = int(self.topology.server_gpus.max())
        counts = tuple([per] * (n_workers // per) + ([n_workers % per] if n_workers % per else []))
        step, actual = self.app(job).step_time(counts, job.batch_size if batch_size is None else batch_size)
        return actual / step



def measured_figures(data_dir: str | Path, per_app: int = 30) -> dict[str, float]:
    """Leave-one-placement-out error of the replay's interpolation: for up to
    ``per_app`` multi-node placements of each application (evenly spread over
    the measured ones), drop every row of that placement, rebuild the
    application from the rest, and predict the dropped step times (over
    nodes, replicas and local batch); MAPE per application."""
    from dataclasses import replace as dc_replace

    apps = load_pollux_applications(Path(data_dir) / "pollux" / "traces")
    figs: dict[str, float] = {}
    for name, app in apps.items():
        p = app.placements
        pids = sorted({str(x) for x in p["placement"] if len(str(x)) >= 2})
        pick = [pids[i] for i in np.linspace(0, len(pids) - 1, min(per_app, len(pids))).astype(int)] if pids else []
        errs = []
        for pid in pick:
            keep = p["placement"] != pid
            rest = dc_replace(app, placements={k: v[keep] for k, v in p.items()}, triangulation=None,
                              _by_placement={}, _interp=None)
            m = ~keep
            for lb, st in zip(p["local_bsz"][m], p["step_time"][m]):
                try:
                    pred, _ = rest.get_throughput(tuple(int(c) for c in pid), float(lb))
                except ValueError:
                    continue  # outside the convex hull of the other measurements
                errs.append(abs(pred - st) / st)
        if errs:
            figs[f"measured_loo_step_mape_pct.{name}"] = round(100 * float(np.mean(errs)), 2)
    return figs
