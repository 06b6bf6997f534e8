"""Checks of the analytic model's interference terms against public
co-location measurements.

1. Network sharing (DeepShare, gajagajago/deepshare ``shared_thp_ratio.csv``:
   throughput of a distributed job (model, GPUs, nodes) while another one
   shares its network, over its throughput alone). In the analytic model two
   jobs on the same bottleneck link stretch each other's transfers by the
   share of time the other keeps the link busy, times a contention gain
   kappa (``perf.analytic``: rho = 1 + kappa u_other), so with f = comm time
   / iteration time alone, the predicted ratio is 1 / (1 + kappa f_A f_B).

   Structural fit (what the simulator uses): f comes from the analytic
   model's ring. A job of model m on G GPUs keeps one direction of each NIC
   busy v_m x L(G) seconds per second of compute, L(G) = 2 (G - 1) / G (ring
   bytes per gradient byte: one ring edge), so f = v_m L / (1 + v_m L); six
   volumes v_m (one per model) and kappa are fitted by least squares to the
   1,260 off-diagonal pairs. kappa goes to ``perf/interference.yaml``, the
   default ``contention`` of the analytic model. For comparison, one free f
   per job (36 parameters, kappa = 1) under the same rule, and under the
   fluid rule (links shared only once saturated), which is how the analytic
   model's burst-overlap rule was chosen.

2. Spreading a job over servers (Gavel, stanford-futuredata/gavel
   ``simulation_throughputs.json``: throughput of a k-GPU job consolidated on
   one server and, under ``*_unconsolidated``, spread over servers). In the
   analytic model the spread job's ring crosses NICs instead of the server's
   fabric, adding Delta(k) = c * 2 (k - 1) / k seconds per iteration, with c
   the gradient bytes x (1/B_net - 1/B_server) of that job type. We fit c per
   job type on k = 2 only and predict the ratio at k = 4 and 8 (held out),
   and also fit it on all k (in sample); we report the median absolute error
   of the unconsolidated / consolidated throughput ratio.

What carries over to the simulator is the form of these terms, which the
fits test, and the contention gain kappa; the per-model volumes describe the
measured jobs (other models than the catalogue's), so they are reported,
not copied into the catalogue.

The per-model compute sensitivity to neighbours on the same CPU socket
(``ModelProfile.compute_sensitivity``) is fitted in ``calibration.colocation`` on
the Pollux single-server rows (workers of one job sharing a socket): none of
the public files measures two different jobs on one socket.

Regenerate the YAML: ``.venv/bin/python -m hrlsched.calibration.interference
--write ../shared/data``.
"""

from __future__ import annotations

import ast
import csv
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

from hrlsched.perf.analytic import PARAMS_FILE, load_params  # noqa: F401 - re-exported


def read_deepshare(path: str | Path) -> tuple[list[str], np.ndarray]:
    path = Path(path)
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    names = [c.strip() for c in rows[0][1:]]
    mat = np.full((len(names), len(names)), np.nan)
    for no, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if row[0].strip() not in names:
            raise ValueError(f"{path}:{no}: row label {row[0]!r} is not one of the column labels")
        i = names.index(row[0].strip())
        if len(row) != len(names) + 1:
            raise ValueError(f"{path}:{no}: expected {len(names) + 1} fields, got {len(row)}")
        for j, raw in enumerate(row[1:]):
            try:
                mat[i, j] = float(raw)
            except ValueError:
                raise ValueError(f"{path}:{no}: field {names[j]!r}: expected a throughput ratio, got {raw!r}") from None
    return names, mat


def overlap_rule(f: np.ndarray) -> np.ndarray:
    """Ratio of job i's throughput beside job j under the analytic model's
    rule: its transfers stretched by 1 + f_j."""
    return 1.0 / (1.0 + np.outer(f, f))


def fluid_rule(f: np.ndarray) -> np.ndarray:
    """The alternative: bandwidth shared only once the link is saturated
    (stretch max(1, f_i + f_j))."""
    u = f[:, None] + f[None, :]
    return 1.0 / (1.0 + f[:, None] * (np.maximum(1.0, u) - 1.0))


def fit_sharing(
    mat: np.ndarray, rule: Callable[[np.ndarray], np.ndarray] = overlap_rule
) -> tuple[np.ndarray, np.ndarray]:
    """f per job minimising the squared error of ``rule(f)`` (i != j)."""
    n = mat.shape[0]
    mask = ~np.eye(n, dtype=bool) & np.isfinite(mat)
    res = least_squares(lambda f: (rule(f) - mat)[mask], np.full(n, 0.3), bounds=(0.0, 1.0))
    return res.x, np.where(mask, rule(res.x), np.nan)


def ring_nic_load(gpus: np.ndarray) -> np.ndarray:
    """Ring bytes per gradient byte on one direction of a NIC of a job spread
    over servers (one ring edge)."""
    g = np.asarray(gpus, dtype=float)
    return 2.0 * (g - 1.0) / g


def parse_jobs(names: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """DeepShare labels 'model,GPUs,nodes' -> (models, model index, GPUs)."""
    parts = [n.split(",") for n in names]
    for n, p in zip(names, parts):
        if len(p) != 3 or not p[1].strip().isdigit():
            raise ValueError(f"job label {n!r}: expected 'model,GPUs,nodes'")
    models = sorted({p[0] for p in parts})
    return models, np.array([models.index(p[0]) for p in parts]), np.array([int(p[1]) for p in parts])


def sharing_predict(volumes: np.ndarray, kappa: float, model_idx: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Predicted throughput ratio of job i (row) sharing with job j (column)."""
    x = np.asarray(volumes)[model_idx] * ring_nic_load(gpus)
    f = x / (1.0 + x)
    return 1.0 / (1.0 + kappa * np.outer(f, f))


def fit_sharing_structural(
    mat: np.ndarray, model_idx: np.ndarray, gpus: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    """(per-model volumes, kappa, predicted matrix) by least squares on the
    off-diagonal ratios; parameters fitted in log space (positive)."""
    n_models = int(model_idx.max()) + 1
    mask = ~np.eye(mat.shape[0], dtype=bool) & np.isfinite(mat)

    def resid(p: np.ndarray) -> np.ndarray:
        return (sharing_predict(np.exp(p[:-1]), float(np.exp(p[-1])), model_idx, gpus) - mat)[mask]

    res = least_squares(resid, np.zeros(n_models + 1))
    v, k = np.exp(res.x[:-1]), float(np.exp(res.x[-1]))
    return v, k, np.where(mask, sharing_predict(v, k, model_idx, gpus), np.nan)


def deepshare_figures(data_dir: str | Path) -> dict[str, float]:
    names, mat = read_deepshare(Path(data_dir) / "deepshare" / "shared_thp_ratio.csv")
    models, mi, gpus = parse_jobs(names)
    v, kappa, pred_s = fit_sharing_structural(mat, mi, gpus)
    ok = np.isfinite(pred_s)
    err_s = np.abs(pred_s - mat)[ok]
    _, pred = fit_sharing(mat)
    err = np.abs(pred - mat)[np.isfinite(pred)]
    _, pred_fluid = fit_sharing(mat, fluid_rule)
    err_fluid = np.abs(pred_fluid - mat)[np.isfinite(pred_fluid)]
    figs = {
        "deepshare_sharing_median_abs_err": round(float(np.median(err_s)), 4),
        "deepshare_sharing_mean_abs_err": round(float(np.mean(err_s)), 4),
        "deepshare_per_job_f_median_abs_err": round(float(np.median(err)), 4),
        "deepshare_fluid_rule_median_abs_err": round(float(np.median(err_fluid)), 4),
        "deepshare_measured_median_slowdown": round(float(np.median(1 - mat[ok])), 4),
        "deepshare_fit_contention": round(kappa, 4),
        "deepshare_pairs": float(err_s.size),
    }
    figs.update({f"deepshare_fit_volume.{m}": round(float(x), 4) for m, x in zip(models, v)})
    return figs


def read_gavel(path: str | Path, gpu: str = "v100") -> dict[str, dict[int, tuple[float, float]]]:
    """{job type: {k: (consolidated, unconsolidated) steps/s}} for k > 1."""
    data = json.loads(Path(path).read_text())
    if gpu not in data or f"{gpu}_unconsolidated" not in data:
        raise ValueError(f"{path}: expected the keys {gpu!r} and '{gpu}_unconsolidated'")
    out: dict[str, dict[int, tuple[float, float]]] = {}
    uncons = data[f"{gpu}_unconsolidated"]
    for key, val in data[gpu].items():
        name, k = ast.literal_eval(key)
        u = uncons.get(key)
        if k < 2 or not isinstance(val, dict) or not isinstance(u, dict):
            continue
        c, s = val.get("null"), u.get("null")
        if c and s and c > 0 and s > 0:
            out.setdefault(name, {})[int(k)] = (float(c), float(s))
    return out


def gavel_predict(c: float, k: np.ndarray, t_cons: np.ndarray) -> np.ndarray:
    """Unconsolidated / consolidated throughput for ring cost c."""
    return t_cons / (t_cons + np.maximum(c, 0.0) * 2.0 * (k - 1) / k)


def gavel_figures(data_dir: str | Path, gpu: str = "v100") -> dict[str, float]:
    table = read_gavel(Path(data_dir) / "gavel" / "simulation_throughputs.json", gpu)
    held, insample = [], []
    for pts in table.values():
        ks = np.array(sorted(pts), dtype=float)
        t_c = np.array([1.0 / pts[int(k)][0] for k in ks])
        ratio = np.array([pts[int(k)][1] / pts[int(k)][0] for k in ks])
        # c from k = 2 alone (closed form), then the other k held out.
        if 2 in pts and len(ks) > 1:
            r2 = ratio[0]
            c2 = max(t_c[0] * (1 / r2 - 1), 0.0) / (2 * (2 - 1) / 2)
            held += list(np.abs(gavel_predict(c2, ks[1:], t_c[1:]) - ratio[1:]))
        fit = least_squares(lambda c: gavel_predict(c[0], ks, t_c) - ratio, [t_c.mean()], bounds=(0.0, np.inf))  # noqa: B023
        insample += list(np.abs(gavel_predict(fit.x[0], ks, t_c) - ratio))
    return {
        "gavel_spread_median_abs_err_heldout_k": round(float(np.median(held)), 4),
        "gavel_spread_median_abs_err_insample": round(float(np.median(insample)), 4),
        "gavel_job_types": float(len(table)),
    }


def write_params(data_dir: str | Path, path: str | Path = PARAMS_FILE) -> dict[str, float]:
    """Fit on the DeepShare matrix and write ``contention`` (with its
    provenance) to the YAML the analytic model reads."""
    figs = deepshare_figures(data_dir)
    doc = {
        "contention": figs["deepshare_fit_contention"],
        "source": "deepshare/shared_thp_ratio.csv (gajagajago/deepshare @ a704439), structural sharing fit",
        "command": ".venv/bin/python -m hrlsched.calibration.interference --write ../shared/data",
        "median_abs_err_of_ratio": figs["deepshare_sharing_median_abs_err"],
        "pairs": int(figs["deepshare_pairs"]),
    }
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False))
    return figs


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]
    if not args or args[0] != "--write" or len(args) != 2:
        raise SystemExit("usage: python -m hrlsched.calibration.interference --write DATA_DIR")
    print(json.dumps(write_params(args[1]), indent=1))
