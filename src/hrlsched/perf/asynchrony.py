"""Asynchronous training: what a stale gradient is worth.

In asynchronous parameter-server training (``mode: async``) each worker
pulls the parameters, computes a gradient on its own mini-batch and pushes
it, with no barrier: a slow worker does not hold the others back, so the
job's speed is the sum of its workers' speeds (the backends compute it;
the PS links are still shared). The price is staleness: by the time a
worker's gradient reaches the PS, the other workers have applied theirs, so
it was computed on parameters that are tau updates old. With w workers
pushing in turn the mean staleness is tau = w - 1 (Zhang et al. measure
<tau> ~ the number of learners; Dutta et al. analyse the same queue).

Statistical efficiency (progress per sample, 1 for a synchronous job):

    eff(w) = 1 / (1 + beta * (w - 1))

Where it comes from: Zhang, Gupta, Lian and Liu, "Staleness-aware
Async-SGD for Distributed Deep Learning" (IJCAI 2016) apply a gradient of
staleness tau with the step eta / tau, which they show keeps convergence
per epoch comparable to synchronous SGD; in SGD's small-step regime the
progress a gradient buys is proportional to its step, so a stale sample is
worth 1/tau of a fresh one under their rule. ``beta`` (``perf.options.
staleness_penalty``) relaxes it: beta = 1 is their rule (the w workers'
throughput buys no progress beyond one worker's), beta = 0 is free
asynchrony. Chen, Pan, Monga, Bengio and Jozefowicz, "Revisiting
Distributed Synchronous SGD" (2016), measured that asynchronous training of
Inception on ImageNet converges more slowly and to a lower accuracy as
workers grow, and Dutta, Joshi, Ghosh, Dube and Nagpurkar, "Slow and Stale
Gradients Can Win the Race" (AISTATS 2018), derive the error-runtime
trade-off in which staleness grows with the number of learners: the form
above has that shape, with one parameter.

The default beta = 0.05 is an assumption, not a fit: no measurement in the
public data folder gives asynchronous convergence. With it, 8 async workers
keep 74% efficiency and 32 keep 39%. Set it from your own convergence runs
(samples to a target accuracy, async over sync, at a few worker counts).

Asynchronous all-reduce is not a thing in practice (a ring all-reduce is a
collective: every worker waits for the others), so the backends refuse it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hrlsched.core.job import Job

DEFAULT_STALENESS_PENALTY = 0.05


def check_staleness_penalty(value: float) -> float:
    """``perf.options.staleness_penalty``: a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"perf.options.staleness_penalty: expected a number in [0, 1], got {value!r}")
    return float(value)


def async_efficiency(n_workers: np.ndarray, penalty: float) -> np.ndarray:
    """Progress per sample of an async job with ``n_workers`` workers."""
    w = np.maximum(np.asarray(n_workers, dtype=float), 1.0)
    return 1.0 / (1.0 + penalty * (w - 1.0))


def refuse_async_allreduce(jobs: Sequence[Job], backend: str) -> None:
    """A clear error for a job that asks for asynchronous all-reduce."""
    for j in jobs:
        if j.mode == "async" and j.arch == "allreduce":
            raise ValueError(
                f"job {j.job_id} ({j.name}): mode 'async' with arch 'allreduce' is not modelled by the {backend} "
                "backend: a ring all-reduce is a collective, every worker waits for the others; "
                "asynchronous training needs arch 'ps'"
            )
