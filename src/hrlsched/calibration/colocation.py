"""Compute-interference sensitivity fitted on co-located workers.

The analytic model slows a worker's compute by ``c = 1 + s_m x pressure``,
with pressure the other tasks on its CPU socket per GPU of the socket
(``perf.analytic``). The public measurements with several GPUs busy on one
socket are the Pollux single-server placements (``pollux/traces/<app>/
placements.csv``: one T4 server, one socket of 4 GPUs, 1 to 4 workers of the
same job): their compute time per step (step time - sync time) grows with
the number of workers beside it, by up to 20% for yolov3 (a CPU-heavy input
pipeline), not at all for bert. The socket is shared the same way whether
the neighbours belong to the same job or another one, so these rows fit s_m
per application:

    step - sync = (a b + c) (1 + s_m (g - 1) / 4)

a, c: the line of the 1-GPU rows over the local batch b; g: the job's
workers on the server. Least squares in s_m, clipped at 0 (bert's compute per
sample is lower on 2-4 GPUs than on one).

Caveats: the compute time of these rows also holds the part of the
all-reduce that PyTorch overlaps with the backward pass, so s_m counts the
socket pressure of the job's own gradient traffic as well; and no public file
measures two *different* jobs on one socket, so the sensitivity of a model to
another model's pressure is assumed to be the same as to its own.

``colocation_figures`` reports s_m per application, the MAPE of the compute
time on 2-4 GPUs with each application's own s_m (in sample), with the
median s of the five others (leave one out), and with none. The catalogue
(``workload.catalogue``) carries the fitted s_m of the six applications, and
their median for the models without such measurements.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hrlsched.perf.goodput import read_placements

APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
SOCKET_GPUS = 4  # one socket of 4 T4 GPUs per server on the Pollux testbed


def compute_line(local_bsz: np.ndarray, time: np.ndarray) -> tuple[float, float]:
    """(a, c) of the least-squares line time = a b + c over the local batch b."""
    A = np.column_stack([np.asarray(local_bsz, dtype=float), np.ones(len(time))])
    (a, c), *_ = np.linalg.lstsq(A, time, rcond=None)
    return float(a), float(c)


def single_server_rows(path: str | Path) -> dict[str, np.ndarray]:
    """Compute time (step - sync) of the single-server rows of one
    ``placements.csv``, the 1-GPU line (a b + c) at the same local batch, and
    the job's workers on the server."""
    t = read_placements(path)
    single = t["num_nodes"] == 1
    g = np.array([int(p) for p in t["placement"][single]], dtype=float)
    b = t["local_bsz"][single].astype(float)
    comp = (t["step_time"] - t["sync_time"])[single]
    a, c = compute_line(b[g == 1], comp[g == 1])
    return {"g": g, "ab": a * b, "c": np.full(g.size, c), "comp": comp}


def fit_sensitivity(rows: dict[str, np.ndarray], socket_gpus: int = SOCKET_GPUS) -> float:
    """s minimising the squared error of (a b + c) (1 + s (g - 1) / socket_gpus)."""
    x = (rows["ab"] + rows["c"]) * (rows["g"] - 1) / socket_gpus
    y = rows["comp"] - rows["ab"] - rows["c"]
    return max(0.0, float(x @ y / (x @ x))) if x @ x > 0 else 0.0


def predict_compute(rows: dict[str, np.ndarray], s: float, socket_gpus: int = SOCKET_GPUS) -> np.ndarray:
    return (rows["ab"] + rows["c"]) * (1 + s * (rows["g"] - 1) / socket_gpus)


def fitted_sensitivities(data_dir: str | Path) -> dict[str, float]:
    """s per Pollux application, from its single-server rows."""
    trace_dir = Path(data_dir) / "pollux" / "traces"
    return {a: round(fit_sensitivity(single_server_rows(trace_dir / a / "placements.csv")), 3) for a in APPS}


def colocation_figures(data_dir: str | Path) -> dict[str, float]:
    trace_dir = Path(data_dir) / "pollux" / "traces"
    rows = {a: single_server_rows(trace_dir / a / "placements.csv") for a in APPS}
    s = {a: fit_sensitivity(r) for a, r in rows.items()}
    figs: dict[str, float] = {f"compute_sensitivity.{a}": round(v, 3) for a, v in s.items()}
    with_s, without, own = [], [], []
    for a, r in rows.items():
        multi = r["g"] > 1
        own.append((np.abs(predict_compute(r, s[a]) - r["comp"]) / r["comp"])[multi])
        s_others = float(np.median([v for k, v in s.items() if k != a]))
        err = np.abs(predict_compute(r, s_others) - r["comp"]) / r["comp"]
        err0 = np.abs(predict_compute(r, 0.0) - r["comp"]) / r["comp"]
        figs[f"compute_interference_loo_mape_pct.{a}"] = round(100 * float(err[multi].mean()), 2)
        with_s.append(err[multi])
        without.append(err0[multi])
    figs["compute_interference_loo_mape_pct.all"] = round(100 * float(np.concatenate(with_s).mean()), 2)
    figs["compute_interference_fitted_mape_pct.all"] = round(100 * float(np.concatenate(own).mean()), 2)
    figs["compute_interference_none_mape_pct.all"] = round(100 * float(np.concatenate(without).mean()), 2)
    return figs
