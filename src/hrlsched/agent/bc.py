"""Behaviour cloning: fit the network's masked action distribution to a
heuristic teacher's actions (``experts.Teacher``: ``optimus`` for level 1,
the environment's ``pack`` placement for level 2), as DL2 warmed up from
DRF before reinforcement learning.

The loss is the cross-entropy of the teacher's action under the *masked*
distribution (the same masking as in PPO), where actions the observation
cannot tell from the teacher's (identical GPUs) count as the teacher's
(``equivalent_targets``); imitation accuracy is the share of steps where the
network's greedy action is the teacher's or equivalent to it, reported per
phase (allocation steps, placement steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hrlsched.agent.common.distributions import MaskedCategorical
from hrlsched.agent.nets import HRLNet
from hrlsched.agent.rollout import Trajectory


@dataclass
class Dataset:
    obs: dict[str, np.ndarray]
    labels: np.ndarray
    targets: np.ndarray  # (steps, actions) bool: the label and the actions equivalent to it


    @property
    def size(self) -> int:
        return int(self.labels.size)


def dataset(trajs: Sequence[Trajectory]) -> Dataset:
    trajs = [t for t in trajs if t.steps]
    if not trajs:
        raise ValueError("behaviour cloning: no recorded steps")
    keys = trajs[0].obs.keys()
    obs = {k: np.concatenate([t.obs[k] for t in trajs]) for k in keys}
    labels = np.concatenate([t.teacher for t in trajs])
    return Dataset(obs, labels, equivalent_targets(obs, labels))


def equivalent_targets(obs: dict[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
    """The teacher's action and every valid action the observation cannot
    tell from it: a GPU (socket) whose feature row equals the row of the
    GPU (socket) the teacher chose. A heuristic breaks ties between
    identical GPUs by index, which no index-free network can learn, so the
    loss is the log of the probability of the whole tied set."""
    mask = obs["action_mask"].astype(bool)
    n, A = mask.shape
    out = np.zeros((n, A), dtype=bool)
    out[np.arange(n), labels] = True
    G = obs["gpus"].shape[1]
    S = obs["sockets"].shape[1]
    off = A - G - S - 1  # the placement block is last: [candidates | GPUs | sockets | defer]
    if off < 0 or "gpus" not in obs:
        return out
    for i in np.flatnonzero((labels >= off) & (labels < off + G + S)):
        a = int(labels[i]) - off
        rows, lo = (obs["gpus"][i], off) if a < G else (obs["sockets"][i], off + G)
        j = a if a < G else a - G
        same = (rows == rows[j]).all(1)
        out[i, lo:lo + rows.shape[0]] |= same & mask[i, lo:lo + rows.shape[0]]
    return out


def set_log_prob(d: MaskedCategorical, targets: torch.Tensor) -> torch.Tensor:
    """log of the probability of the target set."""
    lp = torch.where(targets & d.mask, d.log_p, torch.full_like(d.log_p, float("-inf")))
    return torch.logsumexp(lp, -1)


def batch(obs: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in obs.items():
        t = torch.from_numpy(np.ascontiguousarray(v[idx]))
        out[k] = t.float() if t.dtype == torch.float16 else t
    return out


def evaluate(net: HRLNet, data: Dataset, part: str, batch_size: int = 1024) -> dict[str, float]:
    """Loss and imitation accuracy (overall, allocation steps, placement steps)."""
    net.eval()
    n = data.size
    loss, hit = 0.0, np.zeros(n, dtype=bool)
    with torch.inference_mode():
        for s in range(0, n, batch_size):
            idx = np.arange(s, min(s + batch_size, n))
            b = batch(data.obs, idx)
            logits, _ = net(b, part=part)
            d = MaskedCategorical(logits, b["action_mask"])
            tgt = torch.from_numpy(data.targets[idx])
            loss -= float(set_log_prob(d, tgt).sum())
            hit[idx] = tgt.gather(1, d.greedy()[:, None]).squeeze(1).numpy()
    alloc = data.obs["context"][:, 0] > 0.5  # phase "allocate"
    out = {"loss": loss / max(n, 1), "accuracy": float(hit.mean()) if n else 0.0, "steps": float(n)}
    if alloc.any():
        out["accuracy_allocate"] = float(hit[alloc].mean())
    if (~alloc).any():
        out["accuracy_place"] = float(hit[~alloc].mean())
    return out


def fit(net: HRLNet, train: Dataset, part: str, epochs: int = 5, lr: float = 1e-3, batch_size: int = 256,
        seed: int = 0, valid: Dataset | None = None, log: object = None) -> list[dict[str, float]]:
    """Cross-entropy of the teacher's actions; returns per-epoch metrics."""
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    history = []
    for epoch in range(epochs):
        net.train()
        order = rng.permutation(train.size)
        total = 0.0
        for s in range(0, train.size, batch_size):
            idx = np.sort(order[s:s + batch_size])
            b = batch(train.obs, idx)
            logits, _ = net(b, part=part)
            d = MaskedCategorical(logits, b["action_mask"])
            loss = -set_log_prob(d, torch.from_numpy(train.targets[idx])).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            total += loss.item() * idx.size
        row = {"epoch": epoch + 1, "train_loss": total / train.size}
        if valid is not None:
            row.update({f"valid_{k}": v for k, v in evaluate(net, valid, part).items()})
        history.append(row)
        if callable(log):
            log(row)
    return history
