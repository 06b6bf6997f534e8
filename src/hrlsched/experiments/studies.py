"""The design's studies, one declaration each (``hrlsched experiment NAME``):
what each sweeps, on which scenario, with which policies. The runner is
``experiments.experiment``; ``docs/experiments/<name>.md`` reads each one's
quick run."""

from __future__ import annotations

from hrlsched.experiments.experiment import Experiment, Factor

# The representative set of the sweeps: the classic baselines, the literature's best, the agent and its rules.
REPRESENTATIVE = ("fifo", "srtf", "tiresias", "optimus+pack", "optimus-tuned", "gavel", "pollux", "hrl")
SWEEP_METRICS = ("avg_jct_s",)
TABLE_METRICS = ("avg_jct_s", "p99_jct_s")


def _fitted_contention() -> float:
    from hrlsched.perf.analytic import load_params

    return load_params()["contention"]


# Run time of one run relative to `default`, per scenario of `main` (the ITP week is long for Pollux).
MAIN_COST = {"default": 1.0, "comm": 1.1, "hetero": 1.5, "pollux-w6": 2.0, "itp-c05": 4.0, "itp-c05/1d": 1.0}


def _main_setting(v: str) -> tuple[str, list[str]]:
    # the quick size's ITP window is the week's first day
    return ("itp-c05", ["workload.window_h=24"]) if v == "itp-c05/1d" else (v, [])


def _load(v: float) -> tuple[str, list[str]]:
    # the same jobs arriving over 8 h / v: v times default's offered load
    return "default", [f"workload.duration_h={8.0 / v:g}"]


def _interference(v: float) -> tuple[str, list[str]]:
    # both parts of the analytic model's interference: CPU-socket pressure and link contention
    return "default", [f"perf.options.interference_scale={v:g}", f"perf.options.contention={v * _fitted_contention():g}"]


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in [
    Experiment(
        "main", "every policy on default, comm, hetero, a Pollux workload and an ITP window",
        (Factor("scenario", "scenario", ("default", "comm", "hetero", "pollux-w6", "itp-c05"),
                ("default", "comm", "hetero", "pollux-w6", "itp-c05/1d"), _main_setting,
                cost=lambda v: MAIN_COST[v], categorical=True),),
        quick_seeds=(0,), bound=True, plots=("main",),
        table_metrics=("avg_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "gpu_util_mean", "restarts_total",
                       "max_ftf"),
    ),
    Experiment(
        "load", "offered load from 0.5x to 2x default's (the same jobs arriving faster or slower)",
        (Factor("load", "offered load (x default's)", (0.5, 0.75, 1.0, 1.25, 1.5, 2.0), (0.5, 1.0, 2.0), _load,
                reference=1.0, cost=lambda v: 0.6 + 0.4 * v),),
        policies=REPRESENTATIVE,
    ),
]}
