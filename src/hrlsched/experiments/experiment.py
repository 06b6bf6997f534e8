"""An experiment: one factor swept (``Factor``: a value -> a scenario and its
overrides), every policy it names run on every setting with the same seeds
(paired: a seed draws the same jobs for every policy), one row per policy x
setting x seed in ``results.csv``, and its plots (``experiments.figures``).
The experiments themselves are declared in ``experiments.studies``.

Each run is kept as it finishes, whole (``out/runs/<setting>/<policy>/seed<N>.json``,
written to a temporary name and renamed), with the config it was run with;
running the experiment again (after Ctrl-C, a crash or ``kill -9``) keeps
every run whose config is unchanged and runs the rest. ``results.csv``,
``summary.md``, ``experiment.json`` and the plots are written whole at the
end. Runs go to a local process pool or, with ``backend="ray"``, to a Ray
cluster (``ray.init()``: a local one unless ``RAY_ADDRESS`` names one); the
parent writes every file, so Ray workers need no shared disk."""

from __future__ import annotations

import csv
import io
import json
import math
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.experiments.compare import CompareInterrupted, check_unique, interval, parallel

BACKENDS = ("local", "ray")
# results.csv: what identifies a row, then its figures (summary.json's, and the run's own measures)
KEYS = ["experiment", "factor", "value", "scenario", "policy", "seed", "information", "oracle"]
FIGURES = ["avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "gpu_util_mean", "avg_queue_s",
           "max_ftf", "restarts_total", "delay_s", "jobs_total", "jobs_completed", "offered_load",
           "lower_bound_avg_jct_s", "decisions", "decide_mean_ms", "decide_max_ms", "wall_s", "peak_rss_mb"]
COLUMNS = KEYS + FIGURES


@dataclass(frozen=True)
class Setting:
    """One point of a sweep: the factor, its value there, and the scenario
    with the overrides (``--set``) that make it."""

    factor: str
    value: Any
    scenario: str
    overrides: tuple[str, ...] = ()
    cost: float = 1.0  # run time relative to a run on `default` (time estimates)

    @property
    def label(self) -> str:
        """Its folder under ``runs/`` (and its name in the plots)."""
        return f"{self.factor}={self.value}".replace("/", "_").replace(" ", "_")


@dataclass(frozen=True)
class Factor:
    """A factor swept: ``name`` (results.csv's ``factor``, the plots' file
    names), ``title`` (an axis), the values of the full and of the quick
    size, and ``setting(value) -> (scenario, overrides)``. ``reference``: the
    value each policy is compared to (its loss elsewhere, paired by seed);
    ``cost(value)``: a run's time there relative to `default`."""

    name: str
    title: str
    values: tuple[Any, ...]
    quick: tuple[Any, ...]
    setting: Callable[[Any], tuple[str, list[str]]]
    reference: Any = None
    cost: Callable[[Any], float] = field(default=lambda v: 1.0)
    categorical: bool = False

    def settings(self, quick: bool) -> list[Setting]:
        out = []
        for v in self.quick if quick else self.values:
            scenario, overrides = self.setting(v)
            out.append(Setting(self.name, v, scenario, tuple(overrides), float(self.cost(v))))
        return out


@dataclass(frozen=True)
class Experiment:
    """A study: its factors (each swept on its own, the others at their
    reference), the policies run at every setting (empty: every policy of
    the registry), the evaluation seeds of the full and the quick size.
    ``bound``: the lower bound on JCT (``experiments.bound``) per setting and
    seed, with each job's floor on the first seed (slowdown plots).
    ``measure``: each run in a process of its own, so that its peak memory
    is its own. ``plots``: names in ``experiments.figures.PLOTS``."""

    name: str
    title: str
    factors: tuple[Factor, ...]
    policies: tuple[str, ...] = ()
    quick_policies: tuple[str, ...] | None = None
    seeds: tuple[int, ...] = tuple(range(100))
    quick_seeds: tuple[int, ...] = (0, 1)
    bound: bool = False
    measure: bool = False
    plots: tuple[str, ...] = ("sweep",)
    metrics: tuple[str, ...] = ("avg_jct_s",)  # the sweep plots' rows
    table_metrics: tuple[str, ...] = ("avg_jct_s", "p99_jct_s")  # summary.md's tables
    # the JCT and slowdown CDFs of ``main``: a readable few
    cdf_policies: tuple[str, ...] = ("fifo", "srtf", "tiresias", "optimus", "optimus+pack", "optimus-tuned", "gavel",
                                     "pollux", "hrl", "dl2", "harmony")

    def policy_list(self, quick: bool = False) -> list[str]:
        if quick and self.quick_policies is not None:
            return list(self.quick_policies)
        if self.policies:
            return list(self.policies)
        from hrlsched.policies.registry import PLANNERS, all_policies

        # every scheduler, but not the oracle planners (minutes per episode: docs/headroom.md measures them)
        return [p.name for p in all_policies() if p.kind in ("allocation", "scheduler") and p.name not in PLANNERS]

    def settings(self, quick: bool = False) -> list[Setting]:
        return [s for f in self.factors for s in f.settings(quick)]

    def seed_list(self, quick: bool = False) -> list[int]:
        return list(self.quick_seeds if quick else self.seeds)


# Seconds of one run on `default` (64 GPUs, 200 jobs) on one core of the machine the experiments
# were written on: what the time estimates weigh runs by (a policy not here: DEFAULT_COST).
COST = {"fifo": 0.8, "srtf": 0.7, "srtf-est": 0.7, "tiresias": 0.6, "tiresias-gittins": 0.8, "tiresias-pollux": 1.0,
        "drf": 1.2, "tetris": 1.0, "optimus": 1.7, "optimus+pack": 1.7, "optimus+topology": 3.0,
        "optimus+random": 1.7, "optimus-oracle": 1.7, "optimus-tuned": 1.7, "elas": 1.0, "themis": 2.0, "gavel": 1.6,
        "gavel-makespan": 1.6, "allox": 2.0, "gandiva": 2.0, "gandiva-fair": 2.0, "pollux": 15.0, "hrl": 4.5,
        "dl2": 4.0, "harmony": 4.0}
DEFAULT_COST = 2.0
BOUND_COST = 1.0
START_S = 2.0  # a worker's imports, once per process


def run_cost(policy: str, setting: Setting) -> float:
    return COST.get(policy, DEFAULT_COST) * setting.cost


@dataclass(frozen=True)
class Task:
    """One unit of work: a policy's run at a setting and seed, or (policy
    None) the lower bound there. ``record``: where it is kept."""

    setting: Setting
    policy: str | None
    seed: int
    key: dict[str, Any]  # what it was run with: a kept record is reused only for the same key
    record: Path
    jobs: bool  # keep each job's JCT (and floor): the plots' seed
    cost: float


def _record_path(out: Path, setting: Setting, policy: str | None, seed: int) -> Path:
    name = "lower-bound" if policy is None else policy.replace("+", "_")
    return out / "runs" / setting.label / name / f"seed{seed}.json"


def _checkpoint_tag(policy: str) -> str | None:
    """The content of a learned policy's shipped checkpoint (a changed one reruns its runs)."""
    from hrlsched.policies.registry import LEARNED

    if policy.partition("+")[0] not in LEARNED:
        return None
    from hrlsched.experiments import learned
    from hrlsched.experiments.ablation import source_tag

    return source_tag(learned.shipped_checkpoint(policy.partition("+")[0]))


def plan(exp: Experiment, out: Path, quick: bool = False, seeds: Sequence[int] | None = None) -> list[Task]:
    """Every task of the experiment (bad names and settings refused here,
    before anything runs)."""
    from hrlsched.config import dump_run_config, resolve_run_config
    from hrlsched.policies.registry import make_scheduler

    policies = exp.policy_list(quick)
    check_unique(policies, f"experiment {exp.name}: policies")
    for p in policies:
        make_scheduler(p)  # a bad name fails here
    seed_list = list(seeds) if seeds is not None else exp.seed_list(quick)
    if not seed_list:
        raise ValueError("--seeds: expected at least one seed")
    tags = {p: _checkpoint_tag(p) for p in policies}
    tasks = []
    for s in exp.settings(quick):
        # resolved once per setting (a bad override fails here); a run's config is this one's with
        # its policy and seed, as resolve_run_config would give it
        base = dump_run_config(resolve_run_config(s.scenario, policies[0], seed_list[0], list(s.overrides)))
        for seed in seed_list:
            first = seed == seed_list[0]
            if exp.bound:
                key = {"bound": base["scenario"], "seed": seed, "jobs": first}
                tasks.append(Task(s, None, seed, key, _record_path(out, s, None, seed), first, BOUND_COST * s.cost))
            for p in policies:
                key = {"config": {**base, "policy": p, "seed": seed}, "checkpoint": tags[p], "jobs": first,
                       "measure": exp.measure}
                tasks.append(Task(s, p, seed, key, _record_path(out, s, p, seed), first, run_cost(p, s)))
    return tasks


def estimate_s(tasks: Sequence[Task], workers: int) -> float:
    """Seconds the tasks take on ``workers`` cores (the COST table's machine);
    tasks of the same key run once."""
    once = {json.dumps(t.key, sort_keys=True): t.cost for t in tasks}
    return sum(once.values()) / max(workers, 1) + START_S


def kept(task: Task) -> dict[str, Any] | None:
    """The record of a task already done with the same key."""
    try:
        rec = json.loads(task.record.read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("key") == task.key else None


# ------------------------------------------------------------------ one task, in a worker

def execute(kind: str, key: dict[str, Any]) -> dict[str, Any]:
    """Do one task (in a worker process or a Ray task) and return its record."""
    if kind == "bound":
        return _bound(key)
    return _run(key)


def _bound(key: dict[str, Any]) -> dict[str, Any]:
    from hrlsched.config import ScenarioConfig
    from hrlsched.experiments.bound import BestRates, job_floors
    from hrlsched.scenario import build_scenario

    built = build_scenario(ScenarioConfig.validate(key["bound"]), key["seed"])
    floors = job_floors(built, rates=BestRates(built.perf))
    rec: dict[str, Any] = {"key": key, "row": {"lower_bound_avg_jct_s": float(floors.mean())}}
    if key["jobs"]:
        rec["jobs"] = {"job_id": [j.job_id for j in built.jobs], "floor_s": [float(x) for x in floors]}
    return rec


def _run(key: dict[str, Any]) -> dict[str, Any]:
    from hrlsched.config import RunConfig
    from hrlsched.policies.registry import make_scheduler
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    cfg = RunConfig.validate(key["config"])
    t0 = time.perf_counter()
    sched = make_scheduler(cfg.policy, checkpoint=cfg.checkpoint)
    took: list[float] = []
    decide = sched.decide

    def timed(view: Any) -> Any:  # the scheduler's time per decision, nothing else
        t = time.perf_counter()
        d = decide(view)
        took.append(time.perf_counter() - t)
        return d

    sched.decide = timed  # type: ignore[method-assign]
    res = simulate(cfg, scheduler=sched)
    wall = time.perf_counter() - t0
    row = summary(res, cfg.policy, cfg.scenario.name)
    lat = np.asarray(took) * 1e3
    row.update({
        # job-seconds spent paying launch and restart delays (held, not progressing)
        "delay_s": float(np.sum(res.hold_s - res.productive_s)),
        "decisions": int(lat.size),
        "decide_mean_ms": float(lat.mean()) if lat.size else None,
        "decide_max_ms": float(lat.max()) if lat.size else None,
        "wall_s": wall,
        # the process's high-water mark (its own only where the process ran this run alone: measure)
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024.0 if sys.platform != "darwin" else 1024.0**2),
    })
    rec: dict[str, Any] = {"key": key, "row": {k: row.get(k) for k in FIGURES if k in row}}
    if key["jobs"]:
        jct = res.finish_s - np.array([j.arrival_s for j in res.jobs])
        rec["jobs"] = {"job_id": [j.job_id for j in res.jobs],
                       "jct_s": [None if math.isnan(x) else float(x) for x in jct]}
    return rec


def _execute_task(args: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return execute(*args)


# ------------------------------------------------------------------ backends

def _local(items: list[tuple[str, dict[str, Any]]], workers: int, fresh: bool) -> Iterator[tuple[int, dict[str, Any]]]:
    yield from parallel(_execute_task, items, workers, fresh=fresh)


def _ray(items: list[tuple[str, dict[str, Any]]], workers: int, fresh: bool) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import ray
    except ImportError as e:
        raise ValueError(f"--backend ray needs Ray ({e}); install the extra: pip install 'hrlsched[ray]'") from None
    import os

    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if not os.environ.get("RAY_ADDRESS"):
            kw["num_cpus"] = max(int(workers), 1)
        ray.init(**kw)
        started = True
    # a fresh worker per task where each run's memory is measured
    remote = ray.remote(num_cpus=1, max_calls=1 if fresh else 0)(_execute_task)
    refs = {remote.remote(it): i for i, it in enumerate(items)}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                yield refs[r], ray.get(r)
    finally:
        if pending:  # stopped early (Ctrl-C): the tasks not finished are dropped
            for r in pending:
                ray.cancel(r, force=True)
        if started:
            ray.shutdown()


BACKEND_RUNNERS = {"local": _local, "ray": _ray}


# ------------------------------------------------------------------ the experiment

def run_experiment(
    exp: Experiment,
    out: str | Path,
    quick: bool = False,
    workers: int = 2,
    backend: str = "local",
    seeds: Sequence[int] | None = None,
    progress: Callable[[float, float, int, int], None] | None = None,
    command: str = "",
) -> list[dict[str, Any]]:
    """Run (or keep) every task, then write ``results.csv``, ``summary.md``,
    ``experiment.json`` and the plots into ``out``; return the rows.
    ``progress(cost done, cost in all, runs done, runs in all)``; Ctrl-C
    raises ``CompareInterrupted`` with the runs kept."""
    from hrlsched.io import write_json
    from hrlsched.outdir import check_writable

    if backend not in BACKENDS:
        raise ValueError(f"--backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    t0 = time.monotonic()
    out = Path(out)
    tasks = plan(exp, out, quick, seeds)
    check_writable(out)
    records: dict[int, dict[str, Any]] = {}
    todo = []
    for i, t in enumerate(tasks):
        rec = kept(t)
        if rec is None:
            todo.append(i)
        else:
            records[i] = rec
    total_cost = sum(t.cost for t in tasks)
    done_cost = sum(tasks[i].cost for i in records)
    if progress:
        progress(done_cost, total_cost, len(records), len(tasks))
    # tasks of the same key (a sweep's reference setting, shared by two factors) are run once
    same: dict[str, list[int]] = {}
    for i in todo:
        same.setdefault(json.dumps(tasks[i].key, sort_keys=True), []).append(i)
    groups = list(same.values())
    items = [("bound" if tasks[g[0]].policy is None else "run", tasks[g[0]].key) for g in groups]
    try:
        for j, rec in BACKEND_RUNNERS[backend](items, workers, exp.measure):
            for i in groups[j]:
                write_json(tasks[i].record, rec)  # whole, or not at all
                records[i] = rec
                done_cost += tasks[i].cost
            if progress:
                progress(done_cost, total_cost, len(records), len(tasks))
    except KeyboardInterrupt:
        done = sum(kept(t) is not None for t in tasks)
        raise CompareInterrupted(done, len(tasks), out) from None
    rows = _rows(exp, tasks, records)
    _write_results(out, rows)
    seed_list = sorted({t.seed for t in tasks})
    # each invocation's wall time and the runs it ran, those of earlier ones (interrupted, resumed) kept
    history = _invocations(out / "experiment.json", tasks)
    history.append({"command": command, "workers": workers, "wall_s": round(time.monotonic() - t0, 1),
                    "runs_run": len(todo)})
    write_json(out / "experiment.json", {
        "experiment": exp.name, "title": exp.title, "quick": quick, "seeds": seed_list, "backend": backend,
        "policies": exp.policy_list(quick), "command": command, "version": _version(), "workers": workers,
        "runs": len(tasks), "invocations": history,
        "settings": [{"factor": s.factor, "value": s.value, "scenario": s.scenario, "overrides": list(s.overrides)}
                     for s in exp.settings(quick)],
    })
    from hrlsched.experiments import figures
    from hrlsched.io import write_text

    jobs = {(t.setting.label, t.policy): records[i]["jobs"] for i, t in enumerate(tasks) if "jobs" in records[i]}
    pngs = figures.draw(exp, rows, jobs, out, quick)
    write_text(out / "summary.md", figures.summary_markdown(exp, rows, seed_list, pngs))
    return rows


def _invocations(path: Path, tasks: list[Task]) -> list[dict[str, Any]]:
    """The invocations an earlier ``experiment.json`` recorded, where they
    ran the same tasks."""
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return list(meta.get("invocations", [])) if meta.get("runs") == len(tasks) else []


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hrlsched")
    except PackageNotFoundError:
        return "unknown"


def _rows(exp: Experiment, tasks: list[Task], records: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per policy x setting x seed, its information labelled as
    ``hrlsched evaluate`` labels it, the setting's lower bound beside it."""
    from hrlsched.config import resolve_run_config
    from hrlsched.experiments.evaluate import information
    from hrlsched.policies.registry import make_scheduler

    info: dict[str, str] = {}
    bound = {(t.setting.label, t.seed): records[i]["row"]["lower_bound_avg_jct_s"]
             for i, t in enumerate(tasks) if t.policy is None}
    exact: dict[str, bool] = {}
    rows = []
    for i, t in enumerate(tasks):
        if t.policy is None:
            continue
        if t.policy not in info:
            info[t.policy] = information(make_scheduler(t.policy))
        s = t.setting
        if s.label not in exact:
            pred = resolve_run_config(s.scenario, None, None, list(s.overrides)).scenario.predictor
            exact[s.label] = pred.work_noise == 0 and pred.backend is None  # predicted work = the truth
        label = info[t.policy]
        if label == "predicted work" and exact[s.label]:
            label = "exact predicted work"
        row = {"experiment": exp.name, "factor": s.factor, "value": s.value, "scenario": s.scenario,
               "policy": t.policy, "seed": t.seed, "information": label,
               "oracle": label in ("truth", "exact predicted work")}
        row.update({k: records[i]["row"].get(k) for k in FIGURES})
        row["lower_bound_avg_jct_s"] = bound.get((s.label, t.seed))
        rows.append(row)
    return rows


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    return str(v)


def _write_results(out: Path, rows: list[dict[str, Any]]) -> None:
    from hrlsched.io import write_text

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in COLUMNS])
    write_text(out / "results.csv", buf.getvalue())


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """``results.csv`` back as rows (numbers as floats, empty cells None)."""
    rows = []
    with open(path) as fh:
        for r in csv.DictReader(fh):
            row: dict[str, Any] = dict(r)
            for k in FIGURES + ["seed"]:
                row[k] = float(r[k]) if r[k] != "" else None
            row["oracle"] = r["oracle"] == "true"
            rows.append(row)
    return rows


def mean_ci(values: Sequence[float | None]) -> tuple[float, float]:
    """Mean and 95% half-width over seeds (``compare.interval``), Nones left out."""
    return interval([v for v in values if v is not None])


DOCS_MARK = "<!-- generated by: "


def write_docs(out: str | Path, docs: str | Path, name: str) -> Path:
    """The experiment's page ``docs/<name>.md`` from its output ``out``: its
    plots copied beside it, and below the mark its command, that run's wall
    time and its tables (``summary.md``), replacing what an earlier run put
    there; the reading above the mark is kept (a new page gets a title)."""
    import shutil

    from hrlsched.io import atomic_write, write_text

    out, docs = Path(out), Path(docs)
    meta = json.loads((out / "experiment.json").read_text())
    summary = (out / "summary.md").read_text()
    pngs = summary.rstrip().splitlines()[-1].removeprefix("Plots: ").split(", ") if "Plots: " in summary else []
    for png in pngs:
        atomic_write(docs / png, lambda tmp, src=out / png: shutil.copyfile(src, tmp))
    page = docs / f"{name}.md"
    head = page.read_text().split(DOCS_MARK)[0] if page.is_file() else f"# Experiment `{name}`\n\n"
    inv = meta["invocations"]
    wall = sum(i["wall_s"] for i in inv) / 60
    ran = [i for i in inv if i["runs_run"]]
    n_ran = sum(i["runs_run"] for i in ran)
    if n_ran == meta["runs"]:
        times = f"in {wall:.1f} minutes of wall time" + (
            f" over {len(ran)} invocations (an interrupted run resumed)" if len(ran) > 1 else "")
    elif n_ran > meta["runs"]:  # a later invocation ran some again (a changed checkpoint or config)
        times = (f"in {wall:.1f} minutes of wall time over {len(ran)} invocations, {n_ran - meta['runs']} of "
                 "them run again by a later one (a learned policy's checkpoint changed)")
    else:  # some runs were made by an invocation that recorded no time
        times = (f"({n_ran} of them run by the invocations recorded here, in {wall:.1f} minutes of wall time; "
                 "the others by an earlier one that recorded no time)")
    body = [f"{DOCS_MARK}{meta['command']} (below: its output, rewritten by that command) -->", "",
            f"Made by `{meta['command']}` (hrlsched {meta['version']}, {meta['workers']} workers): {meta['runs']} runs "
            f"{times}.", "",
            summary.rsplit("Plots: ", 1)[0].rstrip(), ""]
    body += [f"![{png}]({png})\n" for png in pngs]
    return write_text(page, head + "\n".join(body))
