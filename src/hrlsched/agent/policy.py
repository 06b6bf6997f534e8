"""The ``hrl`` policy: the trained agent as a scheduler of the engine.

At each decision point (arrivals and completions, as in training) the
active jobs are decided one by one on a ``DecisionPoint`` exactly as in the
environments: the network scores the allocation candidates of each job
(level 1) and, for a checkpoint trained with both levels, points at a GPU
for each worker and a socket for each PS (level 2); a level-1 checkpoint
leaves placement to the heuristic it was trained with (``pack``). Actions
are greedy (the most probable valid action).

Without a path, ``hrl`` loads the checkpoint shipped in the package
(``agent/checkpoints/hrl-default.pt``, trained on ``default``'s generator,
seeds >= 1000). A checkpoint carries its network config, feature schema
and environment settings, so loading it needs no flag to match.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.distributions import MaskedCategorical
from hrlsched.agent.nets import GAP_COLUMNS, GAP_SCALE
from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, Scheduler
from hrlsched.envs.candidates import KEEP

SHIPPED = "hrl-default.pt"


def shipped_checkpoint() -> Path:
    return Path(str(resources.files("hrlsched.agent") / "checkpoints" / SHIPPED))


def trim_jobs(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Drop the padded job rows: the network is invariant to their number,
    and attention over padding is most of the cost on a large cluster."""
    n = max(int(obs["job_mask"].sum()), 1)
    for k in ("jobs", "job_mask", "current_job"):
        obs[k] = obs[k][:n]
    return obs


class HRLScheduler(Scheduler):
    name = "hrl"
    decision_points = "events"

    def __init__(self, checkpoint: str | Path | None = None) -> None:
        path = Path(checkpoint) if checkpoint else shipped_checkpoint()
        self.ck = ckpt.load(path)
        self.path = path
        self.net = ckpt.build_net(self.ck)
        self.part: str = self.ck["part"]
        self.env_kwargs: dict[str, Any] = self.ck["env_kwargs"]
        self.dp = None
        self._scorer: CandidateScorer | None = None
        self.steps = 0  # agent actions taken since reset

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        from hrlsched.envs.decision import DecisionPoint

        torch.set_num_threads(1)
        kw = self.env_kwargs
        # Jobs beyond max_jobs wait (as in training); at least one slot per GPU,
        # so a larger cluster is not starved by the training padding.
        max_jobs = max(int(kw.get("max_jobs", 64)), topology.n_gpus)
        self.dp = DecisionPoint(
            topology, agent_allocates=self.part != "place", agent_places=self.part != "allocate",
            placement=kw.get("placement", "pack"), allocation=kw.get("allocation", "optimus"), max_jobs=max_jobs,
            hint=kw.get("hint"), **{k: kw[k] for k in ("worker_options", "ps_options", "hint_options") if k in kw},
        )
        self.dp.reset(rng)
        self.steps = 0

    def decide(self, view: ClusterView) -> Decision:
        dp = self.dp
        assert dp is not None, "HRLScheduler: reset() first"
        more = dp.begin(view)
        if self.part == "allocate" and self.net.static:
            return self._decide_static(dp, more)
        with torch.inference_mode():
            while more:
                batch = {k: torch.as_tensor(v).unsqueeze(0) for k, v in trim_jobs(dp.observation()).items()}
                logits, _ = self.net(batch, part=self.part)
                a = int(MaskedCategorical(logits, batch["action_mask"]).greedy())
                more = dp.act(a)
                self.steps += 1
        return dp.decision()

    def _decide_static(self, dp: Any, more: bool) -> Decision:
        """A level-1 network that encodes a point once: the encoding with
        torch, then each job's candidates with the scorer in numpy (the same
        function, without torch's per-call overhead on a handful of rows)."""
        if self._scorer is None:
            self._scorer = CandidateScorer(self.net)
        hj = pooled = None
        while more:
            if hj is None:  # a new point: encode it once
                obs = dp.observation()
                with torch.inference_mode():
                    enc = self.net.encode({k: torch.as_tensor(v).unsqueeze(0) for k, v in trim_jobs(obs).items()})
                hj, pooled = enc["hj"][0].numpy(), enc["pooled"][0].numpy()
            k, cluster, context, candidates, valid = dp.allocation_choice()
            logits = self._scorer(cluster, context, pooled, hj[k], candidates)
            # the first most probable valid action (as an argmax over the masked logits)
            more = dp.act(int(valid[np.argmax(logits[valid])]))
            self.steps += 1
        return dp.decision()


class CandidateScorer:
    """``HRLNet.heads`` for ``part="allocate"`` in numpy (logits only):
    the global MLP on the cluster and context rows, the pooled encoding and
    the current job's embedding, then the shared candidate scorer."""

    def __init__(self, net: Any) -> None:
        def layers(seq: torch.nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
            return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
                    for m in seq if isinstance(m, torch.nn.Linear)]

        self.glob = layers(net.glob)
        self.cand = layers(net.cand)
        self.gap = float(GAP_SCALE * net.gap.detach()) if net.cfg.hint_gap else 0.0
        self._x: np.ndarray | None = None

    @staticmethod
    def _mlp(x: np.ndarray, ws: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        (w1, b1), (w2, b2) = ws
        return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2

    def __call__(self, cluster: np.ndarray, context: np.ndarray, pooled: np.ndarray, cur: np.ndarray,
                 candidates: np.ndarray) -> np.ndarray:
        g = self._mlp(np.concatenate([cluster, context, pooled, cur]), self.glob)
        # [candidates | g | cur] on every row: the array ``np.concatenate`` would make, filled in place
        n, d = candidates.shape
        x = self._x
        if x is None or x.shape != (n, d + g.size + cur.size) or x.dtype != np.result_type(candidates, g, cur):
            x = self._x = np.empty((n, d + g.size + cur.size), dtype=np.result_type(candidates, g, cur))
            (w1, b1), (w2, _) = self.cand
            self._h = np.empty((n, w1.shape[1]), dtype=np.result_type(x, w1, b1))
            self._s = np.empty((n, w2.shape[1]), dtype=np.result_type(self._h, w2))
        x[:, :d] = candidates
        x[:, d:d + g.size] = g
        x[:, d + g.size:] = cur
        # ``_mlp(x, self.cand)`` into buffers kept between calls: the same products and sums
        (w1, b1), (w2, b2) = self.cand
        h, s = self._h, self._s
        np.matmul(x, w1, out=h)
        h += b1
        np.maximum(h, 0.0, out=h)
        np.matmul(h, w2, out=s)
        score = s[:, 0] + b2[0]
        if self.gap:
            gap = _hint_gap(candidates)
            if gap is not None:  # else a zero gap: the score as it is
                score = score + self.gap * gap
        return score


def hint_speed_gap_np(c: np.ndarray) -> np.ndarray:
    """``nets.hint_speed_gap`` for one job's candidate rows (N, F), in numpy."""
    gap = _hint_gap(c)
    return np.zeros(c.shape[0], dtype=c.dtype) if gap is None else gap


def _hint_gap(c: np.ndarray) -> np.ndarray | None:
    """``hint_speed_gap_np``, None where it is zero everywhere (the hint is no candidate)."""
    iv, iw, ih, isp = GAP_COLUMNS
    h = int(np.argmax(c[:, ih]))
    if c[h, ih] <= 0 or h <= KEEP:
        return None
    return np.where((c[:, iw] == c[h, iw]) & (c[:, iv] > 0), c[:, isp] - c[h, isp], 0.0).astype(c.dtype)
