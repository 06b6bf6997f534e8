"""Pollux's batch rule over another scheduler's decisions (``policies.goodput_batch``,
``HintConfig.batch``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from helpers import make_view
from hrlsched.config import resolve_run_config
from hrlsched.contract import Decision
from hrlsched.core.placement import Placement
from hrlsched.policies.goodput_batch import GoodputBatch
from hrlsched.policies.hint import SHIPPED
from hrlsched.policies.optimus import Optimus
from hrlsched.policies.pollux import Pollux
from hrlsched.run import simulate
from hrlsched.sim.metrics import summary
from test_literature_policies import pollux_job


def test_nothing_changes_where_no_model_has_gradient_noise() -> None:
    """On the analytic model (every scenario but ``pollux-w*``) the rule has no batch to tune: the
    rules with it run exactly as without (the same finish times)."""
    sets = ["workload.jobs=25", "workload.duration_h=1", "cluster.server_groups.0.count=3"]
    a = simulate(resolve_run_config("default", "optimus-tuned+migrate/batch=own", 4, sets))
    b = simulate(resolve_run_config("default", "optimus-tuned+migrate", 4, sets))  # (the shipped rules tune)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    assert summary(a, "x", "default")["avg_jct_s"] > 0


def test_a_job_placed_anew_gets_pollux_batch_and_a_kept_one_keeps_its_own(measured) -> None:
    """``tune`` names Pollux's goodput-best batch at the placement's servers and GPUs for a job
    placed anew (a larger one on 2 servers and 8 GPUs than alone on 1), nothing for a job that
    keeps its placement; ``own`` puts every job back at its submitted batch."""
    topo, model = measured
    jobs = [pollux_job(0, "cifar10", model), pollux_job(1, "cifar10", model)]
    kept = Placement.of([0])
    view = make_view(topo, model, jobs, placements=[kept, None], progress=[0.3 * jobs[0].total_samples, 0.0])
    view.batch_sizes[0] = 3 * jobs[0].batch_size  # running at a tuned batch
    gb = GoodputBatch()
    gb.reset(topo)
    assert gb.applies(view)
    own = gb.own(view)
    assert own.batch_sizes.tolist() == [j.batch_size for j in jobs] and view.batch_sizes[0] == 3 * jobs[0].batch_size
    wide = Placement.of([4, 5, 6, 7, 8, 9, 10, 11])  # servers 1 and 2 (4 GPUs each)
    d = gb.tune(view, Decision(placements={0: kept, 1: wide}))
    p = Pollux()
    p.reset(topo, np.random.default_rng(0))
    fn, _ = p._goodput_fn(view, 1)
    assert d.batch_sizes == {1: fn(2, 8)[1]} and fn(2, 8)[1] > fn(1, 1)[1]


def test_a_kept_job_is_re_tuned_only_where_the_time_saved_pays_for_the_restart(measured) -> None:
    """A job that keeps its GPUs at a batch far from its best is given the best where its time
    left at its current batch, times the share of goodput it gains, exceeds its restart delay;
    with little work left, or not running, it keeps its batch."""
    topo, model = measured
    job = pollux_job(0, "cifar10", model)
    pl = Placement.of([4, 5, 6, 7, 8, 9, 10, 11])
    gb = GoodputBatch()
    gb.reset(topo)
    p = Pollux()
    p.reset(topo, np.random.default_rng(0))

    view0 = make_view(topo, model, [job], placements=[pl], progress=[0.5 * job.total_samples])
    fn, _ = p._goodput_fn(view0, 0)
    g, best = fn(2, 8)
    app = model.apps["cifar10"]
    low = max(app.init_batch_size, app.min_local_bsz * 8)  # the smallest candidate at 8 GPUs
    g_low, _ = fn(2, 8, low)
    assert 0 < g_low < g and best != low  # the low batch is a candidate, and a worse one

    def decided(left_s: float, speed: float) -> dict[int, int]:
        view = make_view(topo, model, [job], placements=[pl], progress=[0.5 * job.total_samples])
        view.batch_sizes[0], view.speed[0], view.remaining[0] = low, speed, left_s * speed
        return gb.tune(view, Decision(placements={0: pl})).batch_sizes

    restart = model.profile(job).restart_s
    assert decided(100 * restart, 50.0) == {0: best}
    assert decided(0.01 * restart, 50.0) == {}  # too little left to pay for a restart
    assert decided(100 * restart, 0.0) == {}  # not running: nothing measured of it


def test_optimus_prices_worker_counts_at_their_best_goodput_batch(measured) -> None:
    """``batch=goodput``: the hint's Optimus prices each worker count at the batch of best goodput
    there (Pollux's goodput on the fewest servers, in ``isolated_speed``'s units), never below the
    speed at the job's own batch; ncf, whose own batch is far below its best, then gets two
    workers where, priced at its own batch, it got one."""
    topo, model = measured
    jobs = [pollux_job(i, n, model) for i, n in enumerate(["cifar10", "imagenet", "ncf"])]
    view = make_view(topo, model, jobs, placements=[None] * 3, progress=[0.3 * j.total_samples for j in jobs])
    gb = GoodputBatch()
    gb.reset(topo)
    speeds = gb.speeds(view)
    assert speeds is not None
    p = Pollux()
    p.reset(topo, np.random.default_rng(0))
    for k, job in enumerate(jobs):
        fn, _ = p._goodput_fn(view, k)
        init = model.apps[job.model].init_batch_size
        for w, servers in ((1, 1), (4, 1), (8, 2)):
            assert speeds[k](w) == pytest.approx(fn(servers, w)[0] * init, rel=1e-12)
        assert speeds[k](4) >= model.isolated_speed(job, 4, 0) * (1 - 1e-9)
    assert speeds[2](4) > 10 * model.isolated_speed(jobs[2], 4, 0)  # ncf: its own batch, 256, is far from its best

    def allocated(batch: str) -> list[int]:
        hint = dataclasses.replace(SHIPPED, batch=batch, remaining_weight=0.0, keep_s=0.0, keep_frac=0.0,
                                   first_order="arrival")
        o = Optimus(tuning=hint)
        o.reset(topo, np.random.default_rng(0))
        got = o.allocate(view)
        return [got[j.job_id].workers for j in jobs]

    assert allocated("tune") == [3, 4, 1]
    assert allocated("goodput") == [4, 4, 2]


def test_the_rules_tune_batches_on_a_pollux_workload(shared_data) -> None:
    """On a Pollux workload (measured speeds and gradient statistics) the rules with Pollux's
    batch rule change jobs' batches and finish them sooner than at their own batches, and sooner
    still with worker counts priced at those batches (the shipped rules'; pollux-w6, one seed:
    0.813 h, 0.682 h, 0.628 h)."""
    runs = [simulate(resolve_run_config("pollux-w6", f"optimus-tuned+migrate/batch={b}", 0, []))
            for b in ("own", "tune", "goodput")]
    own, tune, good = (summary(r, "x", "pollux-w6")["avg_jct_s"] for r in runs)
    assert tune < 0.95 * own and good < 0.97 * tune, (own, tune, good)


@pytest.mark.slow
def test_the_lookahead_plans_with_the_batch_rule_on_a_pollux_workload(shared_data) -> None:
    """The lookahead's other policies decide at the jobs' own batches too, then get theirs tuned:
    priced at batches tuned for other counts, Optimus asked the measured tables for per-GPU
    batches they lack ("no measurement near placement ...") and the run stopped."""
    res = simulate(resolve_run_config("pollux-w6", "lookahead/every=24/place=migrate", 0, []))
    assert len(res.jobs) == 160 and np.all(np.isfinite(res.finish_s))
