"""Model catalogue: the compute, communication and resource profile of each
model, for the 8 models of the DL2 parameter-server measurements
(``../shared/data/dl2/config_speed.txt``, pengyanghua/DL2).

``theta`` are the coefficients of the Optimus speed function (Peng et al.,
EuroSys'18), time per iteration in seconds on the reference GPU (V100 = 1.0)

    t(w, p) = theta0 * M / w + theta1 + theta2 * w / p + theta3 * w + theta4 * p

with M the global batch, w workers and p parameter servers.

The theta below were fitted on the 793 successful runs of the DL2
measurements (MXNet, parameter-server, synchronous; failed runs dropped) by
``hrlsched calibrate --format dl2 ../shared/data/dl2/config_speed.txt``,
which prints a speed MAPE of 3-10% per model (docs/calibration.md). They are
times on the DL2 testbed's GPUs, which this project takes as its reference
GPU type (relative speed 1.0, the ``V100`` entry of ``cluster.spec.GPU_SPEED``):
absolute times are those of that testbed, relative GPU speeds scale them.
``default_batch`` is the global batch of those measurements. CPU cores and
memory are reservations (the measured CPU use of a worker is 0.5-2 cores,
of a PS 0.3-1.9); model sizes are approximate (parameter counts x 4 bytes of the usual
configurations); the analytic model takes its traffic from theta2 instead.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    # Slowdown per unit of socket pressure (CPU, memory bandwidth, input
    # pipeline): fitted on the Pollux single-server rows (``calibration.colocation``).
    compute_sensitivity: float = 0.0815
    source: str = ""

    @property
    def sample_time_s(self) -> float:
        """Per-sample compute time on the reference GPU."""
        return self.theta[0]


# Compute-interference sensitivity (``calibration.colocation``, ``hrlsched
# validate-perf``): fitted per application on the Pollux single-server rows
# (bert 0, cifar10 0.074, deepspeech2 0.024, imagenet 0.089, ncf 0.13,
# yolov3 0.242); resnet-50 takes imagenet's (the same network), the other DL2
# models, which have no co-location measurements, the median of the six.
MEDIAN_SENSITIVITY = 0.0815


def _p(name: str, mb: float, theta: tuple[float, ...], batch: int, **kw: object) -> ModelProfile:
    return ModelProfile(name, mb, tuple(float(t) for t in theta), batch, **kw)  # type: ignore[arg-type]


CATALOGUE: dict[str, ModelProfile] = {
    p.name: p
    for p in [
        _p("resnet-50", 98, (0.00394, 0.4178, 0.4213, 0.007373, 0.0), 32, restart_s=60, input_mb_per_sample=0.15, compute_sensitivity=0.089),
        _p("vgg-16", 528, (0.01695, 0.5812, 0.7998, 0.1364, 0.0), 32, worker_mem_gb=12, ps_mem_gb=16, restart_s=150, input_mb_per_sample=0.15, compute_sensitivity=MEDIAN_SENSITIVITY),
        _p("resnext-110", 7, (0.0005393, 0.1561, 0.1104, 0.01991, 0.001166), 128, restart_s=20, input_mb_per_sample=0.003, compute_sensitivity=MEDIAN_SENSITIVITY),
        _p("inception-bn", 45, (0.003105, 0.1541, 0.1664, 0.01941, 0.002813), 128, restart_s=45, input_mb_per_sample=0.15, compute_sensitivity=MEDIAN_SENSITIVITY),
        _p("seq2seq", 150, (0.001038, 0.05408, 0.02424, 0.01315, 0.0), 64, restart_s=90, input_mb_per_sample=0.002, compute_sensitivity=MEDIAN_SENSITIVITY),
        _p("cnn-text-classification", 25, (0.007464, 0.3445, 0.02375, 0.01694, 0.0), 50, worker_cores=1, ps_cores=1, restart_s=15, input_mb_per_sample=0.002, compute_sensitivity=MEDIAN_SENSITIVITY),
        _p("dssm", 30, (0.00155, 0.1177, 0.0, 0.0073, 0.0002253), 256, worker_cores=1, ps_cores=1, restart_s=15, input_mb_per_sample=0.001, compute_sensitivity=MEDIAN_SENSITIVITY),
        _p("wlm", 80, (0.0005874, 0.2394, 0.1586, 0.03078, 0.0), 160, restart_s=40, input_mb_per_sample=0.001, compute_sensitivity=MEDIAN_SENSITIVITY),
    ]
}

DL2_MODELS: tuple[str, ...] = tuple(sorted(CATALOGUE))

# The six applications of the Pollux measurements (all-reduce, PyTorch, 4 x T4
# per node). Used as they are by the ``measured`` backend; the theta here only
# serve the other backends: theta0/theta1 are the slope/intercept of the
# single-GPU compute time (step - sync) over the local batch in
# ``pollux/traces/<app>/placements.csv``, theta0 scaled from T4 to the
# reference GPU (x0.45), theta2 the mean sync time of the 2-node, 1-GPU-each
# placement. Default batch: the application's initial batch size.
POLLUX_CATALOGUE: dict[str, ModelProfile] = {
    p.name: p
    for p in [
        _p("bert", 440, (0.0260, 0.2130, 0.733, 0.0, 0.0), 12, worker_mem_gb=16, restart_s=30, input_mb_per_sample=0.002, compute_sensitivity=0.0),
        _p("cifar10", 45, (0.000299, 0.0172, 0.0252, 0.0, 0.0), 128, restart_s=30, input_mb_per_sample=0.003, compute_sensitivity=0.074),
        _p("deepspeech2", 150, (0.01307, 0.0913, 0.144, 0.0, 0.0), 20, restart_s=30, input_mb_per_sample=0.5, compute_sensitivity=0.024),
        _p("imagenet", 98, (0.001894, 0.0784, 0.0615, 0.0, 0.0), 200, restart_s=30, input_mb_per_sample=0.15, compute_sensitivity=0.089),
        _p("ncf", 30, (1.94e-07, 0.00735, 0.0134, 0.0, 0.0), 256, worker_cores=1, restart_s=30, input_mb_per_sample=0.0001, compute_sensitivity=0.13),
        _p("yolov3", 248, (0.01093, 0.2164, 0.489, 0.0, 0.0), 8, worker_mem_gb=16, restart_s=30, input_mb_per_sample=0.5, compute_sensitivity=0.242),
    ]
}
CATALOGUE.update(POLLUX_CATALOGUE)


def get_profile(name: str, catalogue: Mapping[str, ModelProfile] | None = None) -> ModelProfile:
    cat = CATALOGUE if catalogue is None else catalogue
    try:
        return cat[name]
    except KeyError:
        raise KeyError(f"model {name!r} is not in the catalogue; expected one of {sorted(cat)}") from None


def with_theta(profile: ModelProfile, theta: tuple[float, ...]) -> ModelProfile:
    return replace(profile, theta=tuple(float(t) for t in theta))  # type: ignore[arg-type]
