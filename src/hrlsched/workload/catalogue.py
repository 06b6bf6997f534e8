"""Model catalogue: the compute, communication and resource profile of each
model, for the 8 models of the DL2 parameter-server measurements
(``../shared/data/dl2/config_speed.txt``, pengyanghua/DL2).

``theta`` are the coefficients of the Optimus speed function (Peng et al.,
EuroSys'18), time per iteration in seconds on the reference GPU (V100 = 1.0)

    t(w, p) = theta0 * M / w + theta1 + theta2 * w / p + theta3 * w + theta4 * p

with M the global batch, w workers and p parameter servers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelProfile:
    name: str
    params_mb: float  # model size: bytes pushed and pulled by each worker per iteration
    theta: tuple[float, float, float, float, float]
    default_batch: int
    worker_cores: float = 2.0
    worker_mem_gb: float = 8.0
    ps_cores: float = 2.0
    ps_mem_gb: float = 8.0
    restart_s: float = 30.0  # checkpoint-restart delay when the job is moved or resized
    input_mb_per_sample: float = 0.1  # host-to-GPU input traffic per sample
    compute_sensitivity: float = 0.1  # slowdown per unit of neighbour pressure (CPU, memory bw)
    source: str = ""

    @property
    def sample_time_s(self) -> float:
        """Per-sample compute time on the reference GPU."""
        return self.theta[0]


def _p(name: str, mb: float, theta: tuple[float, ...], batch: int, **kw: object) -> ModelProfile:
    return ModelProfile(name, mb, tuple(float(t) for t in theta), batch, **kw)  # type: ignore[arg-type]


# Placeholder theta until calibrated on DL2 measurements; see hrlsched.perf.calibrate.
CATALOGUE: dict[str, ModelProfile] = {
    p.name: p
    for p in [
        _p("resnet-50", 98, (0.0040, 0.02, 0.030, 0.002, 0.002), 32, restart_s=60, input_mb_per_sample=0.15, compute_sensitivity=0.10),
        _p("vgg-16", 528, (0.0070, 0.02, 0.160, 0.004, 0.002), 32, worker_mem_gb=12, ps_mem_gb=16, restart_s=150, input_mb_per_sample=0.15, compute_sensitivity=0.08),
        _p("resnext-110", 7, (0.0008, 0.01, 0.003, 0.001, 0.001), 128, restart_s=20, input_mb_per_sample=0.003, compute_sensitivity=0.15),
        _p("inception-bn", 45, (0.0020, 0.02, 0.015, 0.002, 0.001), 128, restart_s=45, input_mb_per_sample=0.15, compute_sensitivity=0.12),
        _p("seq2seq", 150, (0.0010, 0.02, 0.050, 0.002, 0.002), 64, restart_s=90, input_mb_per_sample=0.002, compute_sensitivity=0.10),
        _p("cnn-text-classification", 25, (0.0015, 0.01, 0.008, 0.001, 0.001), 50, worker_cores=1, ps_cores=1, restart_s=15, input_mb_per_sample=0.002, compute_sensitivity=0.20),
        _p("dssm", 30, (0.0004, 0.01, 0.010, 0.001, 0.001), 256, worker_cores=1, ps_cores=1, restart_s=15, input_mb_per_sample=0.001, compute_sensitivity=0.20),
        _p("wlm", 80, (0.0012, 0.02, 0.025, 0.002, 0.001), 160, restart_s=40, input_mb_per_sample=0.001, compute_sensitivity=0.12),
    ]
}


def get_profile(name: str, catalogue: dict[str, ModelProfile] | None = None) -> ModelProfile:
    cat = CATALOGUE if catalogue is None else catalogue
    try:
        return cat[name]
    except KeyError:
        raise KeyError(f"model {name!r} is not in the catalogue; expected one of {sorted(cat)}") from None


def with_theta(profile: ModelProfile, theta: tuple[float, ...]) -> ModelProfile:
    return replace(profile, theta=tuple(float(t) for t in theta))  # type: ignore[arg-type]
