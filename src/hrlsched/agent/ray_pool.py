"""Rollouts as Ray tasks (``hrlsched train --backend ray``; the optional
extra ``ray``): the same ``rollout.run`` on the same ``RolloutSpec`` jobs as
the local process pool, so a training run gives the same results on either
backend. Starts a local Ray instance with ``workers`` CPUs unless one is
already running (``ray.init`` was called, or ``RAY_ADDRESS`` names a
cluster)."""

from __future__ import annotations

import os
from typing import Any

from hrlsched.agent.rollout import RolloutSpec, Trajectory, run


class RayRolloutPool:
    def __init__(self, workers: int = 2) -> None:
        try:
            import ray
        except ImportError as e:
            raise ValueError(f"--backend ray needs Ray ({e}); install the extra: pip install 'hrlsched[ray]'") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
            if not os.environ.get("RAY_ADDRESS"):
                kw["num_cpus"] = max(int(workers), 1)
            ray.init(**kw)
            self._started = True
        self._run = ray.remote(num_cpus=1)(_run_one_thread)

    def map(self, specs: list[RolloutSpec]) -> list[list[Trajectory]]:
        return self._ray.get([self._run.remote(s) for s in specs])

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


def _run_one_thread(spec: RolloutSpec) -> list[Trajectory]:
    import torch

    torch.set_num_threads(1)
    return run(spec)
