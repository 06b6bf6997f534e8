"""Configuration: validated settings (``hrlsched.schema``), YAML in and out, ``--set a.b=value``.

A run is fully described by a ``RunConfig`` (scenario + policy + seed); its
resolved form is saved as ``config.yaml`` in the run directory, and
``hrlsched simulate --scenario runs/X/config.yaml`` runs it again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import yaml

from hrlsched.cluster.spec import ClusterSpec
from hrlsched.errors import ConfigError as ConfigError  # apart, so that the CLI names it alone
from hrlsched.schema import SchemaError, Settings, setting

# ``omit_default=True`` marks a setting added after runs were recorded: left out of a config's dump while at
# its default (``dump_run_config``), so that every earlier run's config.yaml, which resumes compare, stays as it was.


class SimSettings(Settings):
    round_s: float = setting(60.0, gt=0, description="scheduling interval")
    max_time_s: float = setting(90 * 86400.0, gt=0, description="stop the simulation at this time")
    restart_s: float | None = setting(None, ge=0, description="checkpoint-restart delay; null: per model")
    restart_on_first_start: bool = True
    decision_points: Literal["round", "events", "every"] | None = setting(
        None, description="when the scheduler is asked: every round, at arrivals/completions, or every "
        "decision_every rounds; null: the scheduler's own (events for event-driven policies, else round)"
    )
    decision_every: int = setting(1, ge=1, description="rounds between decision points for decision_points: every")
    restart_scale: float = setting(1.0, ge=0, description="factor on every restart (and launch) delay",
                                   omit_default=True)
    max_restarts: int | None = setting(
        None, ge=0, description="most restarts per job: a job that has had them keeps its placement, batch size, "
        "architecture and mode until it finishes (jobs the decision put on its resources wait); null: no cap",
        omit_default=True)


class PredictorSettings(Settings):
    """What policies may know: the model behind ``ClusterView.perf`` and the
    error of their predictions (``sim.predictor``); oracle policies see the truth."""

    backend: str | None = setting(None, description="perf backend of the predictor; null: the simulator's own model")
    options: dict[str, Any] = setting(factory=dict, description="options of that backend")
    noise: float = setting(0.0, ge=0, description="sigma of a per-job log-normal factor on predicted speeds")
    work_noise: float = setting(0.0, ge=0, description="sigma of a per-job log-normal factor on predicted total work")


class PerfSettings(Settings):
    backend: str = "optimus"
    options: dict[str, Any] = setting(factory=dict)


class SyntheticWorkload(Settings):
    """Jobs of the catalogue's models with heavy-tailed sizes and durations.

    Duration is what the job takes alone at its requested GPUs, placed well;
    its work (samples) is set from it through the performance model."""

    kind: Literal["synthetic"] = "synthetic"
    jobs: int = setting(200, gt=0)
    duration_h: float = setting(8.0, gt=0, description="arrivals (Poisson) spread over this window")
    models: list[str] | None = setting(None, description="null: the 8 DL2 models of the catalogue, uniformly")
    gpu_counts: list[int] = setting(factory=lambda: [1, 2, 4, 8, 16])
    gpu_probs: list[float] = setting(factory=lambda: [0.55, 0.12, 0.15, 0.13, 0.05])
    duration_median_s: float = setting(1800.0, gt=0)
    duration_sigma: float = setting(1.4, ge=0, description="log-normal shape: heavier tail when larger")
    duration_min_s: float = setting(120.0, gt=0)
    duration_max_s: float = setting(3 * 86400.0, gt=0)
    allreduce_fraction: float = setting(0.4, ge=0, le=1)
    async_fraction: float = setting(0.0, ge=0, le=1, description="asynchronous jobs (parameter server only)")
    open_fraction: float = setting(
        0.0, ge=0, le=1, description="jobs that leave arch and mode to the scheduler (drawn arch/mode: their default)"
    )
    users: int = setting(8, gt=0)
    arrivals: Literal["poisson", "diurnal", "bursty"] = setting(
        "poisson", description="arrival process over duration_h (workload.generator): the same jobs and the same "
        "window, so the same offered load", omit_default=True)
    diurnal_ratio: float = setting(9.0, ge=1, description="diurnal: peak/trough arrival rate (Helios: ~9)",
                                   omit_default=True)
    start_hour: float = setting(0.0, ge=0, lt=24, description="diurnal: time of day at t = 0 (peak at 16:00)",
                                omit_default=True)
    target_cv: float = setting(5.0, gt=1, description="bursty: inter-arrival coefficient of variation (ITP: 3-13)",
                               omit_default=True)

    def _check(self) -> None:
        if len(self.gpu_counts) != len(self.gpu_probs):
            raise ValueError(
                f"gpu_probs: expected {len(self.gpu_counts)} probabilities (one per gpu_counts entry), "
                f"got {len(self.gpu_probs)}"
            )
        if any(c < 1 for c in self.gpu_counts):
            raise ValueError(f"gpu_counts: expected positive integers, got {self.gpu_counts}")
        if any(p < 0 for p in self.gpu_probs) or abs(sum(self.gpu_probs) - 1) > 1e-6:
            raise ValueError(f"gpu_probs: expected non-negative values summing to 1, got {self.gpu_probs}")
        if self.duration_min_s > self.duration_max_s:
            raise ValueError("duration_min_s: expected <= duration_max_s")


class ModelBucket(Settings):
    below_gpu_hours: float | None = setting(None, gt=0, description="upper bound of the bucket (null: no bound)")
    models: list[str] = setting(min_length=1)


class JobConversion(Settings):
    """How trace or generated records become jobs (``workload.trace.to_jobs``)."""

    oversize: Literal["cap", "drop"] = setting("cap", description="jobs larger than the cluster")
    model_assignment: Literal["buckets", "mix", "gpu_time"] = setting(
        "buckets", description="models of jobs that name none: by GPU-time bucket (Pollux's rule), a mix, or GPU-time quantile"
    )
    buckets: list[ModelBucket] | None = setting(None, description="null: the Pollux generator's buckets")
    mix: dict[str, float] | None = setting(None, description="{model: weight} for model_assignment: mix")
    models: list[str] | None = setting(None, description="models for model_assignment: gpu_time (null: the DL2 models)")
    allreduce_fraction: float = setting(0.4, ge=0, le=1, description="of jobs not of a Pollux application")
    open_fraction: float = setting(
        0.0, ge=0, le=1, description="jobs that leave arch and mode to the scheduler (besides 'any' in the trace)"
    )

    def _check_conv(self) -> None:
        if self.model_assignment == "mix" and not self.mix:
            raise ValueError("mix: model_assignment 'mix' needs a {model: weight} mix")
        if self.mix and (any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0):
            raise ValueError(f"mix: expected non-negative weights with a positive sum, got {self.mix}")


class TraceWorkload(JobConversion):
    """Jobs from a trace file (``${data}`` stands for the data folder:
    ``$HRLSCHED_DATA`` or ``../shared/data``)."""

    kind: Literal["trace"] = "trace"
    format: Literal["itp", "pollux", "philly", "alibaba", "tiresias", "gavel", "generic"]
    path: str
    window_start_s: float = setting(0.0, ge=0, description="keep arrivals from here (trace time)")
    window_end_s: float | None = setting(None, gt=0, description="keep arrivals before this (trace time)")
    window_h: float | None = setting(None, gt=0, description="window length, when window_end_s is null")
    sample: int | None = setting(None, gt=0, description="keep a uniform sample of this many jobs")
    load_factor: float = setting(1.0, gt=0, description="arrival-rate multiplier (arrival times divided by it)")
    gavel_throughputs: str | None = setting(None, description="Gavel simulation_throughputs.json (null: the data folder's)")
    gavel_worker_type: str = "v100"

    def _check_window(self) -> None:
        if self.window_end_s is not None and self.window_end_s <= self.window_start_s:
            raise ValueError("window_end_s: expected > window_start_s")
        if self.window_end_s is not None and self.window_h is not None:
            raise ValueError("window_h: give window_end_s or window_h, not both")


class GeneratedWorkload(JobConversion):
    """Synthetic jobs with sizes fitted on a real trace and a chosen arrival
    process (``workload.generator``)."""

    kind: Literal["generated"] = "generated"
    jobs: int = setting(500, gt=0)
    sizes: Literal["itp", "philly"] = setting("itp", description="fitted GPU-count and duration profile")
    arrivals: Literal["poisson", "diurnal", "bursty", "replay"] = "poisson"
    load: float | None = setting(1.0, gt=0, description="target offered load on the cluster; null: use duration_h")
    duration_h: float | None = setting(None, gt=0, description="arrival window when load is null")
    diurnal_ratio: float = setting(9.0, ge=1, description="peak/trough arrival rate (Helios: ~9)")
    weekend_factor: float = setting(0.6, gt=0, le=1, description="weekend rate / weekday rate")
    start_hour: float = setting(0.0, ge=0, lt=24, description="time of day at t = 0")
    start_weekday: int = setting(0, ge=0, le=6, description="weekday at t = 0 (0 = Monday)")
    target_cv: float = setting(5.0, gt=1, description="bursty: inter-arrival coefficient of variation (ITP: 3-13)")
    burst_rate_ratio: float | None = setting(None, gt=1, description="bursty: high/low state arrival rate (null: from target_cv)")
    burst_time_fraction: float = setting(0.05, gt=0, lt=1, description="bursty: share of time in the high state")
    replay_path: str | None = setting(None, description="replay: trace whose inter-arrival gaps are replayed")
    replay_format: str = "itp"
    users: int = setting(8, gt=0)

    def _check_gen(self) -> None:
        if self.load is None and self.duration_h is None:
            raise ValueError("load: give a target load or duration_h")
        if self.arrivals == "replay" and not self.replay_path:
            raise ValueError("replay_path: arrivals 'replay' needs a trace to replay")


WorkloadConfig = SyntheticWorkload | TraceWorkload | GeneratedWorkload  # told apart by their kind


class ScenarioConfig(Settings):
    name: str
    description: str = ""
    needs_data: list[str] = setting(factory=list, description="files under the data folder it reads")
    cluster: ClusterSpec
    workload: WorkloadConfig
    sim: SimSettings = setting(factory=SimSettings)
    perf: PerfSettings = setting(factory=PerfSettings)
    predictor: PredictorSettings = setting(factory=PredictorSettings)


class RunConfig(Settings):
    scenario: ScenarioConfig
    policy: str = "fifo"
    seed: int = setting(0, ge=0, description="a seed is an integer >= 0")
    checkpoint: str | None = setting(None, description="the checkpoint of a learned policy: hrl, dl2, harmony (default: shipped)")


def _format_error(e: SchemaError, source: str) -> str:
    return "\n".join([f"{source}: invalid configuration", *(f"  {x}" for x in e.lines())])


def parse_run_config(data: dict[str, Any], source: str) -> RunConfig:
    try:
        return RunConfig.validate(data)
    except SchemaError as e:
        raise ConfigError(_format_error(e, source)) from None


def builtin_scenarios() -> dict[str, Path]:
    root = Path(__file__).resolve().parent / "scenarios"  # package data on disk (importlib.resources: a few ms more)
    return {p.stem: p for p in root.iterdir() if p.suffix == ".yaml"}


def load_yaml(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; expected a scenario YAML file or a run's config.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a text (UTF-8) file (byte {e.start}); expected a scenario YAML") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    cur: Any = data
    for k in keys[:-1]:
        if isinstance(cur, list):
            cur = cur[int(k)]
            continue
        if k not in cur or cur[k] is None:
            cur[k] = {}
        cur = cur[k]
    if isinstance(cur, list):
        cur[int(keys[-1])] = value
    else:
        cur[keys[-1]] = value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``a.b=value`` (value parsed as YAML). Keys not starting with
    ``scenario``, ``policy`` or ``seed`` are relative to the scenario."""
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. sim.round_s=20")
        key = key.strip()
        if key.split(".")[0] not in ("scenario", "policy", "seed", "checkpoint"):
            key = "scenario." + key
        try:
            set_path(data, key, yaml.safe_load(raw))
        except (IndexError, ValueError, TypeError) as e:
            raise ConfigError(f"--set {item!r}: cannot set {key}: {e}") from None
    return data


def parse_case(text: str) -> tuple[str, tuple[str, ...]]:
    """``SCENARIO[@key=value,key=value]``: a scenario with overrides, as one
    name (``default@predictor.work_noise=0.7``); (scenario, overrides)."""
    scen, at, rest = text.strip().partition("@")
    over = tuple(x.strip() for x in rest.split(",") if x.strip()) if at else ()
    if not scen or (at and not over) or any("=" not in o for o in over):
        raise ValueError(f"case {text!r}: expected SCENARIO[@key=value[,key=value]]")
    return scen, over


def resolve_run_config(
    scenario: str, policy: str | None = None, seed: int | None = None, overrides: list[str] | None = None
) -> RunConfig:
    """A built-in scenario name, a scenario YAML, or a saved run ``config.yaml``."""
    builtins = builtin_scenarios()
    if scenario in builtins:
        source = f"scenario {scenario!r}"
        raw = load_yaml(builtins[scenario])
    else:
        path = Path(scenario)
        if not path.exists():
            raise ConfigError(
                f"--scenario {scenario!r}: neither a built-in scenario ({', '.join(sorted(builtins))}) nor a file"
            )
        source = str(path)
        raw = load_yaml(path)
    data: dict[str, Any] = raw if "scenario" in raw else {"scenario": raw}
    if policy is not None:
        data["policy"] = policy
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"--seed {seed}: a seed is an integer >= 0")
        data["seed"] = seed
    apply_overrides(data, overrides or [])
    return parse_run_config(data, source)


def _omit_defaults(model: Settings, data: dict[str, Any]) -> None:
    """Drop from ``data`` (``model``'s dump) the ``omit_default`` settings at their default, at any depth."""
    for f in dataclasses.fields(model):  # type: ignore[arg-type]
        v = getattr(model, f.name)
        if isinstance(v, Settings) and isinstance(data.get(f.name), dict):
            _omit_defaults(v, data[f.name])
        elif f.metadata.get("omit_default") and v == f.default:
            data.pop(f.name, None)


def dump_run_config(cfg: RunConfig) -> dict[str, Any]:
    d = cfg.dump()
    if d.get("checkpoint") is None:
        d.pop("checkpoint", None)  # only runs of the agent name one
    _omit_defaults(cfg, d)
    return d
