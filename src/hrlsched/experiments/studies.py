"""The design's studies, one declaration each (``hrlsched experiment NAME``):
what each sweeps, on which scenario, with which policies. The runner is
``experiments.experiment``; ``docs/experiments/<name>.md`` reads each one's
quick run."""

from __future__ import annotations

from hrlsched.experiments.experiment import Experiment, Factor

# The representative set of the sweeps: the classic baselines, the literature's best, the agent and its rules.
REPRESENTATIVE = ("fifo", "srtf", "tiresias", "optimus+pack", "optimus-tuned", "gavel", "pollux", "hrl")
# The quick size's: without Pollux, whose runs are 60% of the set's time (the full size has it).
QUICK = tuple(p for p in REPRESENTATIVE if p != "pollux")
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


# A day of default's jobs at its offered load: 600 jobs over 24 h (diurnal arrivals see the whole cycle).
DAY = ("workload.jobs=600", "workload.duration_h=24")

# scale: GPUs and jobs at each size (a run's time grows with the jobs, about 10x `default`'s per
# 1,000 jobs in the quick run, whatever the GPUs); `large`'s servers (8 GPUs) repeated, arrivals over 10 h (default's
# offered load per GPU on 1,024 GPUs, a quarter of it on 4,096). The heuristics and the agent (Pollux and
# Gavel, whose searches grow with the cluster, are left to the sweeps).
SIZES = {"256 GPUs, 1000 jobs": (256, 1000), "1024 GPUs, 1000 jobs": (1024, 1000),
         "1024 GPUs, 4000 jobs": (1024, 4000), "4096 GPUs, 4000 jobs": (4096, 4000)}
SCALE_POLICIES = ("fifo", "srtf", "tiresias", "optimus+pack", "optimus-tuned", "hrl")


def _scale(gpus: int, jobs: int) -> tuple[str, list[str]]:
    return "large", [f"cluster.server_groups.0.count={gpus // 8}", f"workload.jobs={jobs}", "workload.duration_h=10"]


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
        policies=REPRESENTATIVE, quick_policies=QUICK,
    ),
    Experiment(
        "interference", "the analytic model's interference (socket pressure) and link contention scaled from 0 to "
        "2x their fitted values; Optimus' allocation placed by pack, topology and random",
        (Factor("interference", "interference and contention (x fitted)", (0.0, 0.5, 1.0, 1.5, 2.0), (0.0, 1.0, 2.0),
                _interference, reference=1.0),),
        policies=(*REPRESENTATIVE, "optimus+topology", "optimus+random"),
        quick_policies=(*QUICK, "optimus+topology", "optimus+random"), plots=("sweep", "placement"),
    ),
    Experiment(
        "prediction-error", "log-normal noise on the remaining work and on the speeds the policies are given "
        "(sigma 0 to 1), each swept with the other exact",
        (Factor("work_noise", "sigma of the work prediction error", (0.0, 0.25, 0.5, 0.75, 1.0), (0.0, 0.5, 1.0),
                lambda v: ("default", [f"predictor.work_noise={v:g}"]), reference=0.0),
         Factor("speed_noise", "sigma of the speed prediction error", (0.0, 0.25, 0.5, 0.75, 1.0), (0.0, 0.5, 1.0),
                lambda v: ("default", [f"predictor.noise={v:g}"]), reference=0.0)),
        policies=REPRESENTATIVE, quick_policies=QUICK,
    ),
    Experiment(
        "overhead", "the restart delay scaled from 0 to 4x, and a cap on restarts per job",
        (Factor("restart_scale", "restart delay (x each model's)", (0.0, 0.5, 1.0, 2.0, 4.0), (0.0, 1.0, 4.0),
                lambda v: ("default", [f"sim.restart_scale={v:g}"]), reference=1.0),
         Factor("max_restarts", "most restarts per job", ("none", 16, 4, 1, 0), ("none", 4, 0),
                lambda v: ("default", [] if v == "none" else [f"sim.max_restarts={v}"]), reference="none")),
        policies=REPRESENTATIVE, quick_policies=QUICK, metrics=("avg_jct_s", "delay_s", "restarts_total"),
        table_metrics=("avg_jct_s", "delay_s", "restarts_total"),
    ),
    Experiment(
        "arrivals", "Poisson, diurnal and bursty arrivals of the same jobs over the same day (the same offered load)",
        (Factor("arrivals", "arrival process", ("poisson", "diurnal", "bursty"), ("poisson", "diurnal", "bursty"),
                lambda v: ("default", [*DAY, f"workload.arrivals={v}"]), reference="poisson", cost=lambda v: 6.0,
                categorical=True),),
        policies=REPRESENTATIVE, quick_policies=QUICK,
    ),
    Experiment(
        "sync-async", "the share of jobs that leave architecture and mode open (0-100%), the share of "
        "asynchronous jobs, and the staleness penalty beta (an assumption: 0.05) with 30% of the jobs asynchronous",
        (Factor("open_fraction", "share of jobs leaving arch and mode open", (0.0, 0.25, 0.5, 0.75, 1.0),
                (0.0, 0.5, 1.0), lambda v: ("default", [f"workload.open_fraction={v:g}"]), reference=0.0),
         Factor("async_fraction", "share of asynchronous jobs", (0.0, 0.15, 0.3, 0.5), (0.0, 0.3),
                lambda v: ("default", [f"workload.async_fraction={v:g}"]), reference=0.0),
         Factor("staleness", "staleness penalty beta (30% async jobs)", (0.0, 0.025, 0.05, 0.1, 0.2, 0.5),
                (0.0, 0.05, 0.2), lambda b: ("default", ["workload.async_fraction=0.3",
                                                          f"perf.options.staleness_penalty={b:g}"]), reference=0.05)),
        policies=REPRESENTATIVE, quick_policies=QUICK,
    ),
    Experiment(
        "scale", "4,000 jobs on 1,024 and on 4,096 GPUs (quick: 1,000 jobs on 256 and 1,024): simulator wall time, "
        "decision latency and memory per policy",
        (Factor("size", "cluster and workload", tuple(SIZES)[2:], tuple(SIZES)[:2], lambda v: _scale(*SIZES[v]),
                cost=lambda v: SIZES[v][1] / 100, categorical=True),),
        # one seed: a study of time and memory, whose full size must fit 30 minutes on 2 cores
        policies=SCALE_POLICIES, seeds=(0,), quick_seeds=(0,), measure=True, plots=("measures",),
        table_metrics=("wall_s", "decide_mean_ms", "decide_max_ms", "peak_rss_mb", "avg_jct_s"),
    ),
]}
