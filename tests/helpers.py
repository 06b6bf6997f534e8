"""Test helpers: hand-built jobs and a scripted scheduler."""

from __future__ import annotations

from collections.abc import Callable

from hrlsched.cluster import Placement
from hrlsched.contract import ClusterView, Decision
from hrlsched.core import Job
from hrlsched.policies.base import Scheduler


def job(job_id: int, arrival: float = 0.0, model: str = "resnet-50", samples: float = 1e4, gpus: int = 1,
        arch: str = "ps", batch: int = 32, mode: str = "sync") -> Job:
    return Job(job_id=job_id, arrival_s=arrival, model=model, total_samples=samples, batch_size=batch,
               requested_gpus=gpus, arch=arch, mode=mode)  # type: ignore[arg-type]


class Scripted(Scheduler):
    """Returns ``fn(view)`` every round."""

    name = "scripted"

    def __init__(self, fn: Callable[[ClusterView], dict[int, Placement] | Decision], event_driven: bool = False,
                 max_tasks_per_gpu: int = 1) -> None:
        self.fn = fn
        self.event_driven = event_driven
        self.max_tasks_per_gpu = max_tasks_per_gpu

    def decide(self, view: ClusterView) -> Decision:
        out = self.fn(view)
        return out if isinstance(out, Decision) else Decision(placements=out)


def make_view(topo, perf, jobs, placements=None, progress=None, attained=None, time_s: float = 0.0):
    """A ClusterView of ``jobs`` (all active) at given placements."""
    import numpy as np

    from hrlsched.contract import ClusterView

    n = len(jobs)
    placements = placements or [None] * n
    progress = np.zeros(n) if progress is None else np.asarray(progress, float)
    tasks = np.zeros(topo.n_gpus, dtype=np.int64)
    for p in placements:
        if p is not None:
            tasks[list(p.gpus)] += 1
    return ClusterView(
        time_s=time_s, round_index=0, round_s=60.0, topology=topo, catalogue=perf.catalogue, perf=perf,
        jobs=list(jobs), progress=progress, remaining=np.array([j.total_samples for j in jobs]) - progress,
        attained_gpu_s=np.zeros(n) if attained is None else np.asarray(attained, float), running_s=np.zeros(n),
        restarts=np.zeros(n, dtype=np.int64), speed=np.zeros(n), batch_sizes=np.array([j.batch_size for j in jobs]),
        placements=list(placements), gpu_tasks=tasks, server_cores_used=np.zeros(topo.n_servers),
        server_mem_used=np.zeros(topo.n_servers),
    )


# A comparison small enough for a test (about 5 s) whose two policies differ:
# 20 jobs arriving in half an hour on 16 GPUs queue, so FIFO and SRTF part ways.
TINY = ["--set", "workload.jobs=20", "--set", "workload.duration_h=0.5", "--set", "cluster.server_groups.0.count=2"]


def tiny_comparison(out):  # noqa: ANN001, ANN201
    """``hrlsched compare`` of fifo+pack and srtf+pack on one seed of a tiny
    ``default`` into ``out`` (a Path), through the command line."""
    from typer.testing import CliRunner

    from hrlsched.cli import app

    r = CliRunner().invoke(app, ["compare", "--scenario", "default", "--policies", "fifo+pack,srtf+pack", "--seeds", "1",
                                 "--workers", "1", "--out", str(out), *TINY])
    assert r.exit_code == 0, r.output
    return out
