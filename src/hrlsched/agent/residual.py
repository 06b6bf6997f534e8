"""The agent's learned residual over its rules: a few named features of each
menu slot, relative to the hint's slot, weighted and added to the slot's
score (``agent.rules.add_rules``'s).

The hint's slot scores 0, and so do *wait* and *keep*: the weights move a
choice away from the hint only to a slot that differs from it in a named
way. With all weights 0 the agent is its rules, to the bit. The features
(``RESIDUAL_FEATURES``):

- ``double``, ``double_x_free``, ``double_x_queued``: the slot has twice the
  hint's workers (its architecture and mode), alone and times the share of
  GPUs free and of jobs queued at the point;
- ``half``, ``half_x_free``, ``half_x_queued``: the same for half the hint's
  workers;
- ``d_speed``: predicted progress over the request, minus the hint slot's;
- ``double_x_arrived``, ``half_x_arrived``: twice or half the hint's workers
  times ``arrived``, the GPUs requested by the jobs that arrived within the
  last hour over the cluster's (the selector's feature,
  ``agent.selector.arrived_share``).

Why these: the choice the lookahead took most often over the rules is a job
at twice (or half) the hint's workers (``docs/headroom.md``), and whether
that pays depends on the room left. A weight on a monotone feature (the
workers themselves) instead makes the extreme slot win everywhere once it
passes the rules' margin (the hint's bonus, 1): every job at 32 workers.
Why ``arrived`` (added after the others): the hetero agent's residual,
trained at full load, halves the hint's workers where many GPUs are free,
and so loses to its rules at a quarter of that load (``docs/agent.md``);
free GPUs and queued jobs do not tell a light load from a burst of free
GPUs while jobs keep arriving, and ``arrived`` does. Searched over all
nine weights, no run found a residual that keeps the full-load gain
without the quarter-load loss; over the four halving weights alone (the
others held at 0, ``train-es --drop-feature``) one did, and it is the
shipped ``hrl-hetero.pt``'s (``docs/agent.md``).
A checkpoint that names fewer features (made before some were added) loads
with the missing ones weighted 0: the same choices.

A checkpoint carries them as ``residual = {"features": [...], "weights": [...]}``;
``hrlsched train-es`` learns the weights (``agent.es``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hrlsched.envs import features as F
from hrlsched.envs.candidates import KEEP
from hrlsched.errors import CheckpointError

RESIDUAL_FEATURES = ("double", "double_x_free", "double_x_queued", "half", "half_x_free", "half_x_queued", "d_speed",
                     "double_x_arrived", "half_x_arrived")
ARRIVED = (RESIDUAL_FEATURES.index("double_x_arrived"), RESIDUAL_FEATURES.index("half_x_arrived"))
_WORKERS, _ARCH, _MODE = F.CANDIDATE["workers"], F.CANDIDATE["arch_ps"], F.CANDIDATE["mode_async"]
_QUEUED, _FREE = F.CLUSTER["queued_jobs"], F.CLUSTER["free_gpus_before"]
_SPEED, _HINT = F.DYN_FEATURES.index("speed_vs_requested"), F.DYN_FEATURES.index("is_hint")


def residual_features(cluster: np.ndarray, base: np.ndarray, dyn: np.ndarray, ix: np.ndarray,
                      arrived: float = 0.0) -> np.ndarray:
    """(valid slots, ``RESIDUAL_FEATURES``) for one choice
    (``DecisionPoint.allocation_rows``' arrays): each feature is the score
    ``residual_scores`` gives with a weight of 1 on it alone (one
    definition; this spelled-out form is for reading and tests)."""
    eye = np.eye(len(RESIDUAL_FEATURES))
    out = np.zeros((len(ix), len(RESIDUAL_FEATURES)), dtype=np.float64)
    for i in range(len(RESIDUAL_FEATURES)):
        out[:, i] = residual_scores(eye[i], cluster, base, dyn, ix, arrived)
    return out


def residual_scores(weights: np.ndarray, cluster: np.ndarray, base: np.ndarray, dyn: np.ndarray,
                    ix: np.ndarray, arrived: float = 0.0) -> np.ndarray | float:
    """The residual's score of each valid slot: its features weighted, with the per-point factors
    folded into two scalars first (a decision point makes hundreds of
    choices: fewer array operations each). 0.0 where the hint's slot is
    *wait*, *keep* or missing. ``arrived``: the point's (``arrived_share``)."""
    h = int(dyn[:, _HINT].argmax())
    return residual_scores_on(weights, float(cluster[_FREE]), float(cluster[_QUEUED]), base[:, _WORKERS],
                              base[:, _ARCH], base[:, _MODE], dyn[:, _SPEED], h if dyn[h, _HINT] > 0 else -1, ix,
                              arrived)


def residual_scores_on(weights: np.ndarray, free: float, queued: float, workers: np.ndarray, arch: np.ndarray,
                       mode: np.ndarray, speed: np.ndarray, hint: int, ix: np.ndarray,
                       arrived: float = 0.0) -> np.ndarray | float:
    """``residual_scores`` on the columns it reads (``DecisionPoint.rule_rows`` and ``residual_rows``,
    without the rest of ``allocation_rows``): the shares of GPUs idle at the point and of jobs
    queued, the valid slots' workers, architecture, mode and speed over the request, the hint's
    row (-1: none)."""
    if hint < 0 or ix[hint] <= KEEP:
        return 0.0
    w = weights
    # (the ``arrived`` terms last: a file without them gives the same sums, to the bit)
    up = w[0] + w[1] * free + w[2] * queued + w[7] * arrived
    down = w[3] + w[4] * free + w[5] * queued + w[8] * arrived
    hw = workers[hint]
    same = (arch == arch[hint]) & (mode == mode[hint])
    out = (up * (same & (np.abs(workers - 2.0 * hw) < 1e-6)) + down * (same & (np.abs(workers - 0.5 * hw) < 1e-6))
           + w[6] * (speed - speed[hint]))
    out[ix <= KEEP] = 0.0
    return out


def residual_scores_at(weights: np.ndarray, free: float, queued: float, twice: np.ndarray, half: np.ndarray,
                       speed: np.ndarray, hint: int, ix: np.ndarray, arrived: float = 0.0) -> np.ndarray | float:
    """``residual_scores_on`` with the slots' kinds read from the menu's partner matrices
    (``DecisionPoint.residual_rows``: ``twice[c, s]``, slot ``s`` has slot ``c``'s architecture
    and mode and twice its workers; ``half`` likewise) and only the weighted terms computed:
    what the agent computes per choice (a point makes hundreds). The same scores as
    ``residual_scores`` on the same choice (a zero's sign aside)."""
    if hint < 0 or ix[hint] <= KEEP:
        return 0.0
    w = weights
    c = ix[hint]
    up = w[0] + w[1] * free + w[2] * queued + w[7] * arrived  # (as ``residual_scores_on``)
    down = w[3] + w[4] * free + w[5] * queued + w[8] * arrived
    if not w[6] and not (up and down):  # one partner kind weighted (the shipped file's): one product
        return up * twice[c][ix] if up else down * half[c][ix]
    out = np.zeros(len(ix))
    if up:
        out += up * twice[c][ix]
    if down:
        out += down * half[c][ix]
    if w[6]:
        d = w[6] * (speed - speed[hint])
        d[ix <= KEEP] = 0.0
        out += d
    return out


def residual_weights(ck: dict[str, Any], source: str = "checkpoint") -> np.ndarray | None:
    """The residual's weights of a loaded checkpoint, in ``RESIDUAL_FEATURES``'
    order (None: it has none; a feature the file does not name: 0);
    ``CheckpointError`` if it names one that is not this version's."""
    r = ck.get("residual")
    if r is None:
        return None
    names = list(r.get("features", []))
    if not names or len(set(names)) != len(names) or any(f not in RESIDUAL_FEATURES for f in names):
        raise CheckpointError(f"{source}: its residual's features {r.get('features')} are not some of this "
                              f"version's {list(RESIDUAL_FEATURES)}")
    try:
        w = np.asarray(r.get("weights", []), dtype=np.float64)
    except (TypeError, ValueError):
        w = np.zeros(0)
    if w.shape != (len(names),) or not np.all(np.isfinite(w)):
        raise CheckpointError(f"{source}: residual weights: expected {len(names)} finite numbers, one per feature")
    out = np.zeros(len(RESIDUAL_FEATURES))
    out[[RESIDUAL_FEATURES.index(f) for f in names]] = w  # a feature the file lacks: weight 0
    return out


def with_residual(ck: dict[str, Any], weights: np.ndarray | None) -> dict[str, Any]:
    """``ck`` with these residual weights (None: without a residual)."""
    out = {k: v for k, v in ck.items() if k != "residual"}
    if weights is not None:
        out["residual"] = {"features": list(RESIDUAL_FEATURES), "weights": [float(x) for x in weights]}
    return out
