"""The agent's learned residual over its rules: a few named features of each
menu slot, relative to the hint's slot, weighted and added to the slot's
score (``agent.rules.add_rules``'s).

Each feature is the slot's value minus the hint slot's, so the hint's slot
scores 0 and the weights move the choice away from it only where a slot
differs; *wait* and *keep* score 0 too (a residual that could push every
job into waiting is the failure a free scorer fell into: small weights
changed nothing, larger ones held the whole queue). With all weights 0
the agent is its rules, to the bit. The features (``RESIDUAL_FEATURES``):

- ``d_workers``: workers over the hint's (``features.WORKER_SCALE`` units);
- ``d_workers_x_queued``, ``d_workers_x_free``: the same times the share of
  jobs queued and of GPUs free at the point (more workers when the cluster
  is idle, fewer when jobs wait);
- ``d_speed``: predicted progress over the request, minus the hint slot's;
- ``d_hours``: the log of the predicted hours to finish, minus the hint's;
- ``d_servers``: servers spanned, minus the hint's;
- ``d_restart``: the restart the slot costs, minus the hint's.

A checkpoint carries them as ``residual = {"features": [...], "weights": [...]}``;
``hrlsched train-es`` learns the weights (``agent.es``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hrlsched.envs import features as F
from hrlsched.envs.candidates import KEEP
from hrlsched.errors import CheckpointError

RESIDUAL_FEATURES = ("d_workers", "d_workers_x_queued", "d_workers_x_free", "d_speed", "d_hours", "d_servers",
                     "d_restart")
_WORKERS, _RESTART = F.CANDIDATE["workers"], F.CANDIDATE["restart_cost"]
_QUEUED, _FREE = F.CLUSTER["queued_jobs"], F.CLUSTER["free_gpus_before"]
_SPEED, _HOURS, _SERVERS, _HINT = (F.DYN_FEATURES.index(c) for c in
                                   ("speed_vs_requested", "log_hours_to_finish", "servers_spanned", "is_hint"))


def residual_features(cluster: np.ndarray, base: np.ndarray, dyn: np.ndarray, ix: np.ndarray) -> np.ndarray:
    """(valid slots, ``RESIDUAL_FEATURES``) for one choice
    (``DecisionPoint.allocation_rows``' arrays); zeros where the hint's slot
    is *wait* or *keep* or missing."""
    out = np.zeros((len(ix), len(RESIDUAL_FEATURES)), dtype=np.float64)
    h = int(dyn[:, _HINT].argmax())
    if dyn[h, _HINT] <= 0 or ix[h] <= KEEP:
        return out
    real = ix > KEEP
    dw = (base[:, _WORKERS] - base[h, _WORKERS]).astype(np.float64)
    out[:, 0] = dw
    out[:, 1] = dw * float(cluster[_QUEUED])
    out[:, 2] = dw * float(cluster[_FREE])
    out[:, 3] = dyn[:, _SPEED] - dyn[h, _SPEED]
    out[:, 4] = dyn[:, _HOURS] - dyn[h, _HOURS]
    out[:, 5] = dyn[:, _SERVERS] - dyn[h, _SERVERS]
    out[:, 6] = base[:, _RESTART] - base[h, _RESTART]
    out[~real] = 0.0
    return out


def residual_weights(ck: dict[str, Any], source: str = "checkpoint") -> np.ndarray | None:
    """The residual's weights of a loaded checkpoint (None: it has none);
    ``CheckpointError`` if its features are not this version's."""
    r = ck.get("residual")
    if r is None:
        return None
    if list(r.get("features", [])) != list(RESIDUAL_FEATURES):
        raise CheckpointError(f"{source}: its residual's features {r.get('features')} are not this version's "
                              f"{list(RESIDUAL_FEATURES)}")
    w = np.asarray(r.get("weights", []), dtype=np.float64)
    if w.shape != (len(RESIDUAL_FEATURES),) or not np.all(np.isfinite(w)):
        raise CheckpointError(f"{source}: residual weights: expected {len(RESIDUAL_FEATURES)} finite numbers")
    return w


def with_residual(ck: dict[str, Any], weights: np.ndarray | None) -> dict[str, Any]:
    """``ck`` with these residual weights (None: without a residual)."""
    out = {k: v for k, v in ck.items() if k != "residual"}
    if weights is not None:
        out["residual"] = {"features": list(RESIDUAL_FEATURES), "weights": [float(x) for x in weights]}
    return out
