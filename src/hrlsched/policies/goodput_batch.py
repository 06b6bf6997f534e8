"""Pollux's batch-size rule applied to another scheduler's decision: each job
placed anew gets the batch size of best goodput at its allocation.

Pollux (Qiao et al., OSDI'21, Sec. 3.1) re-tunes a job's global batch size
(a per-GPU batch and gradient-accumulation steps) to every new allocation:
the batch that maximises goodput, throughput x statistical efficiency, the
efficiency following the gradient noise scale (``policies.pollux.goodput_fn``,
the one home of that function; ``policies.pollux`` searches allocations with
it).

``GoodputBatch`` (``HintConfig.batch`` = ``"tune"`` or ``"goodput"``: the
agent's rules, and the agent): the scheduler decides on the view with every
job at its own batch size, as it was submitted (``Job.batch_size``: what the
measured tables hold at every count; at a batch tuned for other counts a
table can lack the per-GPU batch); then each job placed anew
or moved gets the batch of best goodput at its placement's servers and GPUs.
A job that keeps its placement is re-tuned only where that pays for the
restart a batch change costs in this engine: its predicted time left at its
current batch, times the share of goodput it would gain, exceeds its
model's restart delay. (Its gradient statistics move on as it trains, so the
best batch of its allocation grows; kept at the batch of its first hour, a
yolov3 job on `pollux-w6` took four times as long as at its own batch,
docs/baselines.md. Pollux's artifact
re-tunes as it goes, without a restart; ``policies.pollux`` re-tunes at
re-allocations only.)

Under ``"goodput"`` (shipped) the allocation is priced by goodput too: the
hint's ``Optimus`` prices each worker count at the batch of best goodput
there (``GoodputBatch.speeds``: Pollux's goodput on the fewest servers), the
batch the job then runs at, rather than at the job's own batch (``"tune"``).
On the eight Pollux traces that shortens the rules' average JCT by a further
3-8% (docs/baselines.md).

Only where the performance model has Pollux's applications (the measured
backend: the ``pollux-w*`` scenarios). Elsewhere no model has gradient
noise, so there is no batch to tune: the view and the decision pass as they
came. Simplified against Pollux: the allocation is the scheduler's own
(Optimus's greedy marginal gains of remaining time, not Pollux's search of
the p-power mean of speedups), priced on the fewest servers a count needs
rather than at each candidate placement's servers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision


class GoodputBatch:
    """Pollux's batch rule over a scheduler's decisions (module docstring)."""

    def __init__(self) -> None:
        self._tables: dict = {}  # Pollux's measured step times per application (``pollux.MeasuredGoodput``)
        self._per_server = 1

    def reset(self, topology: Topology) -> None:
        self._tables.clear()
        self._per_server = max(int(topology.server_gpus.max()), 1) if topology.n_servers else 1

    @staticmethod
    def applies(view: ClusterView) -> bool:
        """Whether the view's performance model has Pollux's applications (else nothing to tune)."""
        return bool(view.jobs) and hasattr(view.perf, "apps") and callable(getattr(view.perf, "app", None))

    @staticmethod
    def own(view: ClusterView) -> ClusterView:
        """The view with every job at its own batch size (``view`` itself where they all are)."""
        own = np.fromiter((j.batch_size for j in view.jobs), dtype=view.batch_sizes.dtype, count=len(view.jobs))
        if np.array_equal(own, view.batch_sizes):
            return view
        return dataclasses.replace(view, batch_sizes=own, _index={})

    def speeds(self, view: ClusterView) -> list[Callable[[int], float] | None] | None:
        """Per job of ``view``, its speed at w GPUs at the batch of best goodput there (Pollux's
        goodput, in the units of ``PerformanceModel.isolated_speed``: examples of its first batch's
        efficiency a second), on the fewest servers, as ``isolated_speed`` places it; None for a job
        without an application, and None where the rule does not apply. What ``Optimus`` prices
        worker counts with under ``HintConfig.batch = "goodput"``: each count at the batch the job
        would then run at. A count with no measured batch gives 0 (the caller falls back)."""
        if not self.applies(view):
            return None
        from hrlsched.policies.pollux import application, goodput_fn

        per = self._per_server
        out: list[Callable[[int], float] | None] = []
        for k, job in enumerate(view.jobs):
            app = application(view, job)
            if app is None:
                out.append(None)
                continue
            fn, _ = goodput_fn(view, k, app, self._tables, per)
            init = float(app.init_batch_size)
            out.append(lambda w, fn=fn, init=init: fn(-(-w // per), w)[0] * init)
        return out

    def tune(self, view: ClusterView, d: Decision) -> Decision:
        """``d`` with the batch of best goodput for each job it places anew or moves, and for a
        job it keeps where the time saved pays for the restart (``view``: the real one, at the
        jobs' current batches, with their predicted remaining work and last speed); a batch
        ``d`` names already is kept."""
        # (imported where the rule applies: the policies' own import stays light)
        from hrlsched.policies.pollux import application, goodput_fn

        topo = view.topology
        for jid, pl in d.placements.items():
            if jid in d.batch_sizes:
                continue
            k = view.index(jid)
            kept = view.placements[k] == pl
            if kept and view.speed[k] <= 0:
                continue
            app = application(view, view.jobs[k])
            if app is None:
                continue
            fn, _ = goodput_fn(view, k, app, self._tables, self._per_server)
            nodes = len(set(topo.gpu_server[list(pl.gpus)].tolist()))
            g, b = fn(nodes, len(pl.gpus))
            cur = int(view.batch_sizes[k])
            if b <= 0 or b == cur:
                continue
            if kept:  # re-tuned only where the time it saves exceeds the restart it costs
                g_cur, _ = fn(nodes, len(pl.gpus), cur)
                left = float(view.remaining[k]) / float(view.speed[k])
                if not (g_cur > 0 and left * (1.0 - g_cur / g) > view.perf.profile(view.jobs[k]).restart_s):
                    continue
            d.batch_sizes[jid] = b
        return d


def with_batch_rule(rule: GoodputBatch | None, view: ClusterView,
                    decide: Callable[[ClusterView], Decision]) -> Decision:
    """``decide(view)`` under Pollux's batch rule where ``rule`` is set and applies: decided on
    the view at the jobs' own batches, then the batches tuned (``GoodputBatch.tune``); else as it comes."""
    if rule is None or not rule.applies(view):
        return decide(view)
    return rule.tune(view, decide(GoodputBatch.own(view)))
