"""Returns and advantages over a trajectory, computed backwards in Python
floats (a trajectory is a few thousand steps; numpy's per-element scalars
would cost more than the arithmetic).

``discount`` is a scalar or one factor per step: the discount from a step
to the next one (DL2 discounts by simulated time, Harmony per job placed,
the hrl agent by a constant ``gamma``).
"""

from __future__ import annotations

import numpy as np


def _per_step(discount: float | np.ndarray, n: int) -> list[float]:
    return np.broadcast_to(np.asarray(discount, dtype=np.float64), (n,)).tolist()


def returns_to_go(rewards: np.ndarray, discount: float | np.ndarray = 1.0) -> np.ndarray:
    """The discounted return from each step to the end."""
    r = np.asarray(rewards, dtype=np.float64).tolist()
    d = _per_step(discount, len(r))
    out = np.zeros(len(r), dtype=np.float64)
    acc = 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = r[t] + d[t] * acc
        out[t] = acc
    return out


def gae(rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray, discount: float | np.ndarray,
        lam: float) -> np.ndarray:
    """Generalised advantage estimation (Schulman et al., ICLR'16): A_t =
    delta_t + discount_t * lam * A_{t+1}, with the TD error delta_t = r_t +
    discount_t * V(next_t) - V(t); ``next_values`` 0 after a terminal step."""
    dl = _per_step(discount, len(values))
    delta = (rewards + np.asarray(dl) * next_values - values).tolist()
    adv = np.zeros(len(delta), dtype=np.float64)
    acc = 0.0
    for t in range(len(delta) - 1, -1, -1):
        acc = delta[t] + dl[t] * lam * acc
        adv[t] = acc
    return adv
