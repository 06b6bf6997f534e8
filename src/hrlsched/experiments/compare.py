"""Policies x seeds on one scenario, in parallel; a table with means and 95%
intervals over seeds, and plots of all policies together."""

from __future__ import annotations

import csv
import io
import json
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.cluster import Topology
from hrlsched.config import (
    RunConfig,
    dump_run_config,
    load_yaml,
    parse_run_config,
    resolve_run_config,
)
from hrlsched.io import write_text
from hrlsched.outdir import check_writable
from hrlsched.sim import plots
from hrlsched.stats import interval

BOUND = "lower bound"  # the last row of a comparison


def check_unique(names: list[str], what: str = "--policies") -> None:
    """A list of names where none is given twice (``ValueError`` naming them)."""
    dup = sorted({p for p in names if names.count(p) > 1})
    if dup:
        raise ValueError(f"{what}: {', '.join(dup)} named more than once")
METRICS = ["avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "gpu_util_mean", "avg_queue_s",
           "max_ftf", "restarts_total", "jobs_completed"]


class CompareInterrupted(Exception):
    """Ctrl-C during a comparison: the runs finished so far are on disk."""

    def __init__(self, done: int, total: int, out: Path) -> None:
        super().__init__(f"interrupted: {done} of {total} runs done, kept in {out}")
        self.done, self.total, self.out = done, total, out


def _ignore_sigint() -> None:
    # Ctrl-C reaches the whole process group; only the parent handles it, so
    # that workers do not each print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_one(cfg_json: str, out: str) -> tuple[str, int, dict[str, Any]]:
    from hrlsched.run import run_to_dir

    cfg = RunConfig.validate(json.loads(cfg_json))
    # compare owns its runs/ folders: an unfinished earlier attempt is replaced
    summ = run_to_dir(cfg, out, plots=False, force=True)
    return cfg.policy, cfg.seed, summ


def finished_run(cfg: RunConfig, out: Path) -> dict[str, Any] | None:
    """The summary of a run already done with this exact config (for resume)."""
    import yaml

    summ, conf = out / "summary.json", out / "config.yaml"
    if not (summ.is_file() and conf.is_file()):
        return None
    if conf.read_text(errors="replace") != yaml.safe_dump(dump_run_config(cfg), sort_keys=False):
        return None
    try:
        return json.loads(summ.read_text())
    except ValueError:
        return None


def run_dir(out: Path, label: str, seed: int) -> Path:
    """Where the run of ``label`` (a policy name, or another name for a
    configured variant of one) on ``seed`` is kept under ``out``."""
    return out / "runs" / label.replace("+", "_") / f"seed{seed}"


def parallel(fn: Callable[[Any], Any], items: list[Any], workers: int, fresh: bool = False) -> Iterator[tuple[int, Any]]:
    """``(index, fn(item))`` of each item as it finishes, on ``workers``
    processes (in this one where ``workers`` is 1). ``fresh``: a new process
    per item (its peak memory its own). Ctrl-C, or the caller stopping early,
    ends the pool's processes and drops the items not started."""
    if workers <= 1 and not fresh:
        for i, it in enumerate(items):
            yield i, fn(it)
        return
    kw: dict[str, Any] = {}
    if fresh:
        import multiprocessing

        kw = {"max_tasks_per_child": 1, "mp_context": multiprocessing.get_context("spawn")}
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_sigint, **kw)
    try:
        futs = {pool.submit(fn, it): i for i, it in enumerate(items)}
        for f in as_completed(futs):
            yield futs[f], f.result()
    except BaseException:
        # Stop now: drop queued items and end the running ones (a run
        # writes its files only when they are whole, so none is left half).
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
        # Let the pool's manager thread see its dead workers and close its wakeup pipe
        # before the interpreter exits: else concurrent.futures' exit hook may write to
        # the pipe as it closes and print an OSError traceback (CPython 3.11).
        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=5)
            # Under load the join may time out with the pipe about to close: take the thread off
            # the hook's list (it is not a daemon, so the interpreter still waits for it).
            from concurrent.futures import process as _process

            getattr(_process, "_threads_wakeups", {}).pop(manager, None)
        raise
    pool.shutdown()


def _run_item(item: tuple[str, str]) -> tuple[str, int, dict[str, Any]]:
    return _run_one(*item)


def run_all(
    runs: list[tuple[str, RunConfig]],
    out: Path,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> dict[tuple[str, int], dict[str, Any]]:
    """Run each ``(label, config)`` into ``run_dir(out, label, seed)``, in
    parallel, and return each run's summary by ``(label, seed)``. A run
    already there with the same config is kept, not rerun (an interrupted
    batch resumes by calling again); each run's directory is written whole."""
    results: dict[tuple[str, int], dict[str, Any]] = {}
    todo = []
    for label, c in runs:
        d = run_dir(out, label, c.seed)
        prev = finished_run(c, d)
        if prev is not None:  # resume: a run already done with the same config
            results[(label, c.seed)] = prev
        else:
            todo.append((label, json.dumps(c.dump()), str(d)))
    total = len(runs)
    if progress:
        progress(len(results), total)
    try:
        for k, (_, s, summ) in parallel(_run_item, [(cj, o) for _, cj, o in todo], workers):
            results[(todo[k][0], s)] = summ
            if progress:
                progress(len(results), total)
    except KeyboardInterrupt:
        # Count what is on disk: a run may have finished after its last report.
        done = sum(finished_run(c, run_dir(out, label, c.seed)) is not None for label, c in runs)
        raise CompareInterrupted(done, total, out) from None
    return results


def compare(
    scenario: str,
    policies: list[str],
    seeds: int,
    out: str | Path,
    workers: int = 1,
    overrides: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    checkpoint: str | None = None,
) -> list[dict[str, Any]]:
    """``checkpoint``: the agent's weights for policy ``hrl`` (None: shipped)."""
    out = Path(out)
    if not policies:
        raise ValueError("--policies: expected at least one policy name")
    check_unique(policies)
    check_writable(out)
    ck = []
    if checkpoint is not None:  # (a shipped checkpoint's name is its file: hrlsched checkpoint list)
        from hrlsched.agent.common.shipped import checkpoint_path

        ck = [f"checkpoint={checkpoint_path(checkpoint).resolve()}"]
    cfgs = [resolve_run_config(scenario, p, s, [*(overrides or []), *(ck if p == "hrl" else [])])
            for p in policies for s in range(seeds)]
    results = run_all([(c.policy, c) for c in cfgs], out, workers, progress)
    rows = []
    for p in policies:
        row: dict[str, Any] = {"policy": p, "seeds": seeds}
        for m in METRICS:
            mean, half = interval([results[(p, s)].get(m) for s in range(seeds)])
            row[m] = mean
            row[f"{m}_ci95"] = half
        rows.append(row)
    rows.append(bound_row(cfgs[:seeds]))
    write_outputs(out, scenario, rows, policies, seeds)
    return rows


def bounds(cfgs: list[RunConfig]) -> list[float]:
    """The lower bound on average JCT (s) of each config's scenario and seed
    (``experiments.bound``; the configs share one scenario)."""
    from hrlsched.experiments.bound import BestRates, lower_bound
    from hrlsched.scenario import build_scenario

    built = [build_scenario(c.scenario, c.seed) for c in cfgs]
    rates = BestRates(built[0].perf)  # one search shared by the seeds (same cluster and model)
    return [lower_bound(b, rates=rates)["avg_jct_s"] for b in built]


def bound_row(cfgs: list[RunConfig]) -> dict[str, Any]:
    """The floor under every policy's row: the lower bound on average JCT
    (``experiments.bound``: each job alone at its best allocation) on the same
    seeds; the other columns do not apply."""
    vals = bounds(cfgs)
    row: dict[str, Any] = {"policy": BOUND, "seeds": len(cfgs)}
    for m in METRICS:
        row[m], row[f"{m}_ci95"] = float("nan"), float("nan")
    row["avg_jct_s"], row["avg_jct_s_ci95"] = interval(vals)
    return row


def write_outputs(out: Path, scenario: str, rows: list[dict[str, Any]], policies: list[str], seeds: int) -> None:
    cols = ["policy", "seeds"] + [c for m in METRICS for c in (m, f"{m}_ci95")]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([r[c] if isinstance(r[c], str) else (f"{r[c]:.6g}" if r[c] == r[c] else "") for c in cols])
    write_text(out / "comparison.csv", buf.getvalue())
    write_text(out / "comparison.md", markdown_table(scenario, rows, seeds))
    jcts, series = {}, {}
    for p in [p for p in policies if p != BOUND]:
        run = run_dir(out, p, 0)
        with open(run / "jobs.csv") as fh:
            jcts[p] = np.array([float(x["jct_s"]) if x["jct_s"] else np.nan for x in csv.DictReader(fh)])
        with open(run / "rounds.csv") as fh:
            rr = list(csv.DictReader(fh))
        series[p] = {k: np.array([float(x[k]) for x in rr]) for k in ("time_s", "gpus_busy", "jobs_queued")}
    first = run_dir(out, policies[0], 0) / "config.yaml"
    n_gpus = Topology.from_spec(parse_run_config(load_yaml(first), str(first)).scenario.cluster).n_gpus
    plots.plot_jct_cdf(jcts, out / "jct_cdf.png", title=f"{scenario}: job completion times (CDF), seed 0")
    plots.plot_timeline(series, n_gpus, out / "utilisation.png",
                        title=f"{scenario}: GPU utilisation and queue over time, seed 0")


def markdown_table(scenario: str, rows: list[dict[str, Any]], seeds: int) -> str:
    """The summary table of a comparison (``comparison.md``)."""
    md = [f"Scenario `{scenario}`, {seeds} seed(s); mean ± 95% interval over seeds.", "",
          "| policy | avg JCT (h) | p95 JCT (h) | makespan (h) | GPU util | avg queue (h) | max FTF | restarts |",
          "|---|---|---|---|---|---|---|---|"]

    def pm(r: dict[str, Any], m: str, scale: float = 1.0, fmt: str = ".2f") -> str:
        v, h = r[m], r[f"{m}_ci95"]
        if v != v:
            return "-"
        return f"{v / scale:{fmt}}" + ("" if h != h else f" ± {h / scale:{fmt}}")

    for r in rows:
        md.append(f"| {r['policy']} | {pm(r, 'avg_jct_s', 3600)} | {pm(r, 'p95_jct_s', 3600)} | {pm(r, 'makespan_s', 3600)} | "
                  f"{pm(r, 'gpu_util_mean')} | {pm(r, 'avg_queue_s', 3600)} | {pm(r, 'max_ftf')} | {pm(r, 'restarts_total', 1, '.0f')} |")
    return "\n".join(md) + "\n"
