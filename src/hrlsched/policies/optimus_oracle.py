"""Optimus+Oracle (Peng et al., EuroSys'18, as the Pollux authors re-implemented
it for their comparison: Qiao et al., OSDI'21, Sec. 5.2, "Optimus+Oracle").

Rules followed (Optimus' allocation, Sec. 4.1, with the oracle of the Pollux
comparison):
- Remaining work is known exactly (``oracle = True``: the engine gives it the
  true remaining work and model even when a scenario sets a noisy
  ``predictor``), instead of Optimus' online loss-curve fit: remaining steps at the job's own batch size = remaining
  progress / progress per step (with the measured backend, the statistical
  gain of that batch at the current epoch).
- Step time at r GPUs is known exactly: the backend's prediction of the job
  alone on r GPUs packed on the fewest servers.
- Every active job first gets one GPU (arrival order) while GPUs last; then,
  one GPU at a time, the job whose remaining time drops most
  ((step(r) - step(r + 1)) x remaining steps) gets the next, until no GPU is
  left or no gain is positive. A job may not exceed batch / smallest local
  batch GPUs (the measured applications' limit), and jobs of applications
  that the artifact pins to one GPU (ncf) keep one.
- Re-allocation every round (60 s in the Pollux workloads); the batch size
  is the workload's (TunedJobs), not tuned.

Departures: placement is ours (``pack``: fewest servers, a job whose GPU
count is unchanged stays where it is) rather than the artifact's own node
filling; the remaining steps use the gain at the current epoch instead of
the per-epoch iteration counts of the validation traces.
"""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy

ONE_GPU_APPS = frozenset({"ncf"})


class OptimusOracle(AllocationPolicy):
    name = "optimus-oracle"
    event_driven = False
    oracle = True  # the true remaining work and step times, whatever the scenario's predictor
    reads_work = True
    default_placement = "pack"

    def _step_time_fn(self, view: ClusterView, k: int):
        job = view.jobs[k]
        b = int(view.batch_sizes[k])
        perf = view.perf
        app = perf.app(job) if hasattr(perf, "apps") else None
        if app is not None:
            _, _, actual = app.batch_config(1, b)
            gain = app.gain(actual, float(view.progress[k]) / app.init_batch_size)
            steps = float(view.remaining[k]) / app.init_batch_size / max(gain, 1e-12)
            limit = 1 if app.name in ONE_GPU_APPS else max(1, b // app.min_local_bsz)
            per = int(view.topology.server_gpus.max())

            def step(r: int) -> float:
                counts = tuple([per] * (r // per) + ([r % per] if r % per else []))
                return app.step_time(counts, b)[0]

            return step, steps, limit
        steps = float(view.remaining[k]) / b

        def step_generic(r: int) -> float:
            return b / perf.isolated_speed(job, r, job.num_ps_requested, b)

        return step_generic, steps, view.topology.n_gpus

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        n = len(view.jobs)
        free = int(view.topology.n_gpus)
        r = np.zeros(n, dtype=np.int64)
        fns = [self._step_time_fn(view, k) for k in range(n)]
        order = np.argsort([j.arrival_s for j in view.jobs], kind="stable")
        for k in order:
            if free < 1:
                break
            r[k] = 1
            free -= 1
        memo: dict[tuple[int, int], float] = {}

        def st(k: int, w: int) -> float:
            key = (k, w)
            if key not in memo:
                try:
                    memo[key] = fns[k][0](w)
                except ValueError:
                    memo[key] = np.inf  # outside what the measurements cover
            return memo[key]

        def gain(k: int) -> float:
            if r[k] == 0 or r[k] + 1 > fns[k][2]:
                return 0.0
            return (st(k, int(r[k])) - st(k, int(r[k]) + 1)) * fns[k][1]

        gains = np.array([gain(k) for k in range(n)])
        while free > 0 and n and gains.max() > 0:
            k = int(np.argmax(gains))
            r[k] += 1
            free -= 1
            gains[k] = gain(k)
        ps = [j.num_ps_requested for j in view.jobs]
        chosen = [k for k in np.argsort(-r, kind="stable") if r[k] > 0]
        return {view.jobs[k].job_id: Allocation(int(r[k]), ps[k]) for k in chosen}
