"""Configuration: pydantic models, YAML in and out, ``--set a.b=value``.

A run is fully described by a ``RunConfig`` (scenario + policy + seed); its
resolved form is saved as ``config.yaml`` in the run directory, and
``hrlsched simulate --scenario runs/X/config.yaml`` runs it again.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hrlsched.cluster.spec import ClusterSpec
from hrlsched.errors import ConfigError as ConfigError  # apart, so that the CLI names it alone


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A setting added after runs were recorded: left out of a config's dump while at its default
# (``dump_run_config``), so that every earlier run's config.yaml, which resumes compare, stays as it was.
OMIT_DEFAULT: dict[str, Any] = {"omit_default": True}


class SimSettings(Strict):
    round_s: float = Field(60.0, gt=0, description="scheduling interval")
    max_time_s: float = Field(90 * 86400.0, gt=0, description="stop the simulation at this time")
    restart_s: float | None = Field(None, ge=0, description="checkpoint-restart delay; null: per model")
    restart_on_first_start: bool = True
    decision_points: Literal["round", "events", "every"] | None = Field(
        None, description="when the scheduler is asked: every round, at arrivals/completions, or every "
        "decision_every rounds; null: the scheduler's own (events for event-driven policies, else round)"
    )
    decision_every: int = Field(1, ge=1, description="rounds between decision points for decision_points: every")
    restart_scale: float = Field(1.0, ge=0, description="factor on every restart (and launch) delay",
                                 json_schema_extra=OMIT_DEFAULT)
    max_restarts: int | None = Field(
        None, ge=0, description="most restarts per job: a job that has had them keeps its placement, batch size, "
        "architecture and mode until it finishes (jobs the decision put on its resources wait); null: no cap",
        json_schema_extra=OMIT_DEFAULT)


class PredictorSettings(Strict):
    """What policies may know: the model behind ``ClusterView.perf`` and the
    error of their predictions (``sim.predictor``); oracle policies see the truth."""

    backend: str | None = Field(None, description="perf backend of the predictor; null: the simulator's own model")
    options: dict[str, Any] = Field(default_factory=dict, description="options of that backend")
    noise: float = Field(0.0, ge=0, description="sigma of a per-job log-normal factor on predicted speeds")
    work_noise: float = Field(0.0, ge=0, description="sigma of a per-job log-normal factor on predicted total work")


class PerfSettings(Strict):
    backend: str = "optimus"
    options: dict[str, Any] = Field(default_factory=dict)


class SyntheticWorkload(Strict):
    """Jobs of the catalogue's models with heavy-tailed sizes and durations.

    Duration is what the job takes alone at its requested GPUs, placed well;
    its work (samples) is set from it through the performance model."""

    kind: Literal["synthetic"] = "synthetic"
    jobs: int = Field(200, gt=0)
    duration_h: float = Field(8.0, gt=0, description="arrivals (Poisson) spread over this window")
    models: list[str] | None = Field(None, description="null: the 8 DL2 models of the catalogue, uniformly")
    gpu_counts: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16])
    gpu_probs: list[float] = Field(default_factory=lambda: [0.55, 0.12, 0.15, 0.13, 0.05])
    duration_median_s: float = Field(1800.0, gt=0)
    duration_sigma: float = Field(1.4, ge=0, description="log-normal shape: heavier tail when larger")
    duration_min_s: float = Field(120.0, gt=0)
    duration_max_s: float = Field(3 * 86400.0, gt=0)
    allreduce_fraction: float = Field(0.4, ge=0, le=1)
    async_fraction: float = Field(0.0, ge=0, le=1, description="asynchronous jobs (parameter server only)")
    open_fraction: float = Field(
        0.0, ge=0, le=1, description="jobs that leave arch and mode to the scheduler (drawn arch/mode: their default)"
    )
    users: int = Field(8, gt=0)
    arrivals: Literal["poisson", "diurnal", "bursty"] = Field(
        "poisson", description="arrival process over duration_h (workload.generator): the same jobs and the same "
        "window, so the same offered load", json_schema_extra=OMIT_DEFAULT)
    diurnal_ratio: float = Field(9.0, ge=1, description="diurnal: peak/trough arrival rate (Helios: ~9)",
                                 json_schema_extra=OMIT_DEFAULT)
    start_hour: float = Field(0.0, ge=0, lt=24, description="diurnal: time of day at t = 0 (peak at 16:00)",
                              json_schema_extra=OMIT_DEFAULT)
    target_cv: float = Field(5.0, gt=1, description="bursty: inter-arrival coefficient of variation (ITP: 3-13)",
                             json_schema_extra=OMIT_DEFAULT)

    @model_validator(mode="after")
    def _check(self) -> SyntheticWorkload:
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
        return self


class ModelBucket(Strict):
    below_gpu_hours: float | None = Field(None, gt=0, description="upper bound of the bucket (null: no bound)")
    models: list[str] = Field(min_length=1)


class JobConversion(Strict):
    """How trace or generated records become jobs (``workload.trace.to_jobs``)."""

    oversize: Literal["cap", "drop"] = Field("cap", description="jobs larger than the cluster")
    model_assignment: Literal["buckets", "mix", "gpu_time"] = Field(
        "buckets", description="models of jobs that name none: by GPU-time bucket (Pollux's rule), a mix, or GPU-time quantile"
    )
    buckets: list[ModelBucket] | None = Field(None, description="null: the Pollux generator's buckets")
    mix: dict[str, float] | None = Field(None, description="{model: weight} for model_assignment: mix")
    models: list[str] | None = Field(None, description="models for model_assignment: gpu_time (null: the DL2 models)")
    allreduce_fraction: float = Field(0.4, ge=0, le=1, description="of jobs not of a Pollux application")
    open_fraction: float = Field(
        0.0, ge=0, le=1, description="jobs that leave arch and mode to the scheduler (besides 'any' in the trace)"
    )

    @model_validator(mode="after")
    def _check_conv(self) -> JobConversion:
        if self.model_assignment == "mix" and not self.mix:
            raise ValueError("mix: model_assignment 'mix' needs a {model: weight} mix")
        if self.mix and (any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0):
            raise ValueError(f"mix: expected non-negative weights with a positive sum, got {self.mix}")
        return self


class TraceWorkload(JobConversion):
    """Jobs from a trace file (``${data}`` stands for the data folder:
    ``$HRLSCHED_DATA`` or ``../shared/data``)."""

    kind: Literal["trace"] = "trace"
    format: Literal["itp", "pollux", "philly", "alibaba", "tiresias", "gavel", "generic"]
    path: str
    window_start_s: float = Field(0.0, ge=0, description="keep arrivals from here (trace time)")
    window_end_s: float | None = Field(None, gt=0, description="keep arrivals before this (trace time)")
    window_h: float | None = Field(None, gt=0, description="window length, when window_end_s is null")
    sample: int | None = Field(None, gt=0, description="keep a uniform sample of this many jobs")
    load_factor: float = Field(1.0, gt=0, description="arrival-rate multiplier (arrival times divided by it)")
    gavel_throughputs: str | None = Field(None, description="Gavel simulation_throughputs.json (null: the data folder's)")
    gavel_worker_type: str = "v100"

    @model_validator(mode="after")
    def _check_window(self) -> TraceWorkload:
        if self.window_end_s is not None and self.window_end_s <= self.window_start_s:
            raise ValueError("window_end_s: expected > window_start_s")
        if self.window_end_s is not None and self.window_h is not None:
            raise ValueError("window_h: give window_end_s or window_h, not both")
        return self


class GeneratedWorkload(JobConversion):
    """Synthetic jobs with sizes fitted on a real trace and a chosen arrival
    process (``workload.generator``)."""

    kind: Literal["generated"] = "generated"
    jobs: int = Field(500, gt=0)
    sizes: Literal["itp", "philly"] = Field("itp", description="fitted GPU-count and duration profile")
    arrivals: Literal["poisson", "diurnal", "bursty", "replay"] = "poisson"
    load: float | None = Field(1.0, gt=0, description="target offered load on the cluster; null: use duration_h")
    duration_h: float | None = Field(None, gt=0, description="arrival window when load is null")
    diurnal_ratio: float = Field(9.0, ge=1, description="peak/trough arrival rate (Helios: ~9)")
    weekend_factor: float = Field(0.6, gt=0, le=1, description="weekend rate / weekday rate")
    start_hour: float = Field(0.0, ge=0, lt=24, description="time of day at t = 0")
    start_weekday: int = Field(0, ge=0, le=6, description="weekday at t = 0 (0 = Monday)")
    target_cv: float = Field(5.0, gt=1, description="bursty: inter-arrival coefficient of variation (ITP: 3-13)")
    burst_rate_ratio: float | None = Field(None, gt=1, description="bursty: high/low state arrival rate (null: from target_cv)")
    burst_time_fraction: float = Field(0.05, gt=0, lt=1, description="bursty: share of time in the high state")
    replay_path: str | None = Field(None, description="replay: trace whose inter-arrival gaps are replayed")
    replay_format: str = "itp"
    users: int = Field(8, gt=0)

    @model_validator(mode="after")
    def _check_gen(self) -> GeneratedWorkload:
        if self.load is None and self.duration_h is None:
            raise ValueError("load: give a target load or duration_h")
        if self.arrivals == "replay" and not self.replay_path:
            raise ValueError("replay_path: arrivals 'replay' needs a trace to replay")
        return self


WorkloadConfig = Annotated[SyntheticWorkload | TraceWorkload | GeneratedWorkload, Field(discriminator="kind")]


class ScenarioConfig(Strict):
    name: str
    description: str = ""
    needs_data: list[str] = Field(default_factory=list, description="files under the data folder it reads")
    cluster: ClusterSpec
    workload: WorkloadConfig
    sim: SimSettings = Field(default_factory=SimSettings)
    perf: PerfSettings = Field(default_factory=PerfSettings)
    predictor: PredictorSettings = Field(default_factory=PredictorSettings)


class RunConfig(Strict):
    scenario: ScenarioConfig
    policy: str = "fifo"
    seed: int = Field(0, ge=0, description="a seed is an integer >= 0")
    checkpoint: str | None = Field(None, description="the checkpoint of a learned policy: hrl, dl2, harmony (default: shipped)")


def _format_error(e: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}: {msg}" + (f" (got {err['input']!r})" if err["type"] != "value_error" and not isinstance(err.get("input"), dict) else ""))
    return "\n".join(lines)


def parse_run_config(data: dict[str, Any], source: str) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_error(e, source)) from None


def builtin_scenarios() -> dict[str, Path]:
    root = resources.files("hrlsched") / "scenarios"
    return {Path(str(p)).stem: Path(str(p)) for p in root.iterdir() if str(p).endswith(".yaml")}


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


def _omit_defaults(model: BaseModel, data: dict[str, Any]) -> None:
    """Drop from ``data`` (``model``'s dump) the OMIT_DEFAULT settings at their default, at any depth."""
    for name, f in type(model).model_fields.items():
        v = getattr(model, name)
        if isinstance(v, BaseModel) and isinstance(data.get(name), dict):
            _omit_defaults(v, data[name])
        elif isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("omit_default") and v == f.default:
            data.pop(name, None)


def dump_run_config(cfg: RunConfig) -> dict[str, Any]:
    d = cfg.model_dump(mode="json")
    if d.get("checkpoint") is None:
        d.pop("checkpoint", None)  # only runs of the agent name one
    _omit_defaults(cfg, d)
    return d
