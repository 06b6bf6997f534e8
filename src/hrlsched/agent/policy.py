"""The ``hrl`` policy: the trained agent as a scheduler of the engine.

At each decision point (arrivals and completions, as in training) the
active jobs are decided one by one on a ``DecisionPoint`` exactly as in the
environments: the network scores the allocation candidates of each job
(level 1) and, for a checkpoint trained with both levels, points at a GPU
for each worker and a socket for each PS (level 2); a level-1 checkpoint
leaves placement to the heuristic it was trained with (its ``placement``
setting: ``pack``, or ``migrate`` for the shipped one). Actions
are greedy (the most probable valid action).

Without a path, ``hrl`` loads the checkpoint shipped in the package
(``agent/checkpoints/hrl-default.pt``, trained on ``default``'s generator,
seeds >= 1000). A checkpoint carries its network config, feature schema
and environment settings, so loading it needs no flag to match.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.common.distributions import MaskedCategorical
from hrlsched.agent.common.shipped import checkpoint_path, shipped_checkpoint
from hrlsched.agent.placement_choice import PlacementChoice, placement_weights
from hrlsched.agent.residual import ARRIVED, residual_scores, residual_scores_at, residual_weights
from hrlsched.agent.rules import GAP_SCALE, add_rules, agent_point, rules_scores
from hrlsched.agent.selector import Selector, arrived_share, selector_weights
from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, Scheduler
from hrlsched.envs import features as F
from hrlsched.envs.candidates import WORKER_OPTIONS
from hrlsched.envs.features import DYN_COLUMNS
from hrlsched.errors import CheckpointError
from hrlsched.policies.goodput_batch import GoodputBatch, with_batch_rule
from hrlsched.policies.hint import TUNED, HintConfig

SHIPPED = "agent/checkpoints/hrl-default.pt"


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
    reads_work = True  # its observation holds each job's predicted remaining work

    def __init__(self, checkpoint: str | Path | None = None) -> None:
        path = checkpoint_path(checkpoint) if checkpoint else shipped_checkpoint(SHIPPED)
        self.ck = ckpt.load(path)
        self.path = path
        self.net = ckpt.build_net(self.ck)
        self.part: str = self.ck["part"]
        self.env_kwargs: dict[str, Any] = self.ck["env_kwargs"]
        # the hint and how a point uses it (level 1; None for a placement-only checkpoint)
        self.hint: HintConfig | None = ckpt.hint_of(self.ck) if self.part != "place" else None
        # the learned residual over the rules (``agent.residual``; None: none)
        self.residual = residual_weights(self.ck, str(path))
        if self.residual is not None and not (self.part == "allocate" and self.net.static):
            raise CheckpointError(f"{path}: a residual needs a level-1 network that encodes a point once")
        # the learned point selector among other heuristics' whole decisions (``agent.selector``; None: none)
        sel = selector_weights(self.ck, str(path))
        self.selector = Selector(sel) if sel is not None else None
        # the learned choice among candidate placements (``agent.placement_choice``; None: pack's)
        pw = placement_weights(self.ck, str(path))
        if pw is not None and self.part != "allocate":
            raise CheckpointError(f"{path}: a placement choice needs a level-1 network (the placement is not learned "
                                  "task by task)")
        self.placement = PlacementChoice(pw) if pw is not None else None
        # Pollux's batch rule over its decisions (``hint.batch``; None: each job at its own batch)
        self.batch = GoodputBatch() if self.hint is not None and self.hint.batch in TUNED else None
        self.dp = None
        self._scorer: CandidateScorer | None = None
        self.steps = 0  # agent actions taken since reset
        self._warm = False  # the encoder run once (``_warm_up``)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        torch.set_num_threads(1)
        kw = self.env_kwargs
        allocates = self.part != "place"
        self.dp = agent_point(topology, self.hint if allocates else None, allocates=allocates,
                              places=self.part != "allocate", placement=kw.get("placement", "pack"),
                              allocation=kw.get("allocation", "optimus"),
                              worker_options=kw.get("worker_options", WORKER_OPTIONS),
                              ps_options=kw.get("ps_options"), max_jobs=int(kw.get("max_jobs", 64)))
        self.dp.reset(rng)
        self.dp.place_choice = self.placement
        if self.placement is not None:
            self.placement.reset()
        self.steps = 0
        if self.selector is not None:
            self.selector.reset(topology)
        if self.batch is not None:
            self.batch.reset(topology)
        if not self._warm:
            self._warm_up()

    def _warm_up(self) -> None:
        """Run the encoder once on an empty observation of this cluster's
        shape, so that torch's one-time costs of its first calls (a few ms)
        fall here, at start-up, rather than in the first decision point."""
        assert self.dp is not None
        obs = {k: np.zeros(sp.shape, dtype=sp.dtype) for k, sp in self.dp.observation_space.spaces.items()}
        for k in ("job_mask", "gpu_mask", "socket_mask", "link_mask"):
            obs[k][:1] = 1
        with torch.inference_mode():
            self.net.encode({k: torch.as_tensor(v).unsqueeze(0) for k, v in trim_jobs(obs).items()})
        self._warm = True

    def decide(self, view: ClusterView) -> Decision:
        # No cyclic garbage collection inside a decision: a full one scans every object of the
        # process (15-20 ms at 500 jobs), a latency of its own. It runs after, between points.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return with_batch_rule(self.batch, view, self._decide_and_select)
        finally:
            if collecting:
                gc.enable()

    def _decide_and_select(self, view: ClusterView) -> Decision:
        """Its own decision, or the one its point selector takes instead."""
        d = self._decide(view)
        if self.selector is None:
            return d
        return self.selector.decide(view, d, self.dp.pricing if self.dp is not None else None)

    def _decide(self, view: ClusterView) -> Decision:
        dp = self.dp
        assert dp is not None, "HRLScheduler: reset() first"
        more = dp.begin(view)
        if self.part == "allocate" and self.net.static:
            return self._decide_static(dp, more, view)
        with torch.inference_mode():
            while more:
                batch = {k: torch.as_tensor(v).unsqueeze(0) for k, v in trim_jobs(dp.observation()).items()}
                logits, _ = self.net(batch, part=self.part)
                a = int(MaskedCategorical(logits, batch["action_mask"]).greedy())
                more = dp.act(a)
                self.steps += 1
        return dp.decision()

    def _decide_static(self, dp: Any, more: bool, view: ClusterView) -> Decision:
        """A level-1 network that encodes a point once: the encoding with
        torch, then each job's candidates with the scorer in numpy (the same
        function, without torch's per-call overhead on a handful of rows,
        and with the first layers split into what a point, a job and a
        choice change: ``CandidateScorer.point`` and ``score``)."""
        if self._scorer is None:
            self._scorer = CandidateScorer(self.net, self.residual)
        scorer = self._scorer
        encoded = scorer.silent  # a silenced scorer reads no encoding: none is made
        light = scorer.silent  # the rules (and a residual): only what they read is made
        if scorer.residual is not None and scorer.residual[list(ARRIVED)].any():
            scorer.arrived = arrived_share(view)  # the point's, read by the residual (``agent.residual``)
        while more:
            if light:
                speed, hint, workers, ix = dp.rule_rows()
                s = rules_scores(speed, hint, workers, ix, scorer.gap, scorer.bonus)
                if scorer.residual is not None:  # (as ``CandidateScorer.score``'s sum)
                    free, queued, twice, half = dp.residual_rows()
                    s = s + residual_scores_at(scorer.residual, free, queued, twice, half, speed, hint, ix,
                                               scorer.arrived)
                more = dp.act(int(ix[s.argmax()]))
                self.steps += 1
                continue
            if not encoded:  # a new point: encode it once
                obs = dp.observation()
                with torch.inference_mode():
                    enc = self.net.encode({k: torch.as_tensor(v).unsqueeze(0) for k, v in trim_jobs(obs).items()})
                scorer.point(enc["hj"][0].numpy(), enc["pooled"][0].numpy())
                encoded = True
            k, cluster, context, base, dyn, ix = dp.allocation_rows()
            # the first most probable valid action (as an argmax over the masked logits)
            more = dp.act(int(ix[scorer.score(k, cluster, context, base, dyn, ix).argmax()]))
            self.steps += 1
        return dp.decision()


class CandidateScorer:
    """``HRLNet.heads`` for ``part="allocate"`` in numpy (logits only):
    the global MLP on the cluster and context rows, the pooled encoding and
    the current job's embedding, then the shared candidate scorer.

    ``point`` and ``score`` compute it with the first layer of each MLP
    split by the inputs' blocks (their weights' rows): what only
    the point changes (the pooled encoding) and each job's embedding are
    multiplied once per point, the fixed part of a job's candidate rows once
    per ``base`` array (``DecisionPoint.allocation_rows``), so a choice costs
    the cluster and context rows, the global MLP's second layer and the few
    columns of the rows that change (``DYN_COLUMNS``), on the valid slots
    only. The sums are taken in another order than the network's, so the
    logits differ from its by float rounding (about 1e-7 relative).
    ``residual``: the weights of a learned residual over the rules
    (``agent.residual``), added to the scores; None: none. ``arrived``:
    the point's share of recently arrived demand that the residual reads
    (``agent.selector.arrived_share``), set at each point where it is weighted."""

    def __init__(self, net: Any, residual: np.ndarray | None = None) -> None:
        self.residual = residual
        self.arrived = 0.0
        def layers(seq: torch.nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
            return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
                    for m in seq if isinstance(m, torch.nn.Linear)]

        self.glob = layers(net.glob)
        self.cand = layers(net.cand)
        self.gap = float(GAP_SCALE * net.gap.detach()) if net.cfg.hint_gap else 0.0
        self.bonus = float(net.bonus.detach()) if net.cfg.hint_bonus else 0.0
        # the first layers' weights by input block (``heads``' concatenations)
        d = net.cfg.d
        n_cc = len(F.CLUSTER_FEATURES) + len(F.CONTEXT_FEATURES)
        n_c = len(F.CANDIDATE_FEATURES)
        (g1, _), _ = self.glob
        (c1, _), _ = self.cand
        if g1.shape[0] < n_cc + d or c1.shape[0] != n_c + 2 * d:
            raise ValueError(f"CandidateScorer: unexpected layer sizes {g1.shape}, {c1.shape}")
        self._g_cc, self._g_pool, self._g_cur = g1[:n_cc], g1[n_cc:-d], g1[-d:]
        self._c_rows, self._c_g, self._c_cur = c1[:n_c], c1[n_c:n_c + d], c1[n_c + d:]
        self._c_dyn = c1[list(DYN_COLUMNS)]
        _, (v2, u2) = self.cand
        self._v, self._u = v2[:, 0].copy(), u2[0]
        # The last layer all zero (the rules-only ablation; the shipped agent, whose scorer learned
        # nothing over its rules): every score is 0 before the rules, so the network is not run.
        self.silent = not self._v.any() and not self._u
        # the global MLP's output enters only the candidate layer: its second layer folded into it
        self._g_c = self.glob[1][0].dot(self._c_g)
        self._pj: np.ndarray | None = None
        self._hc: np.ndarray | None = None
        self._based: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def point(self, hj: np.ndarray, pooled: np.ndarray) -> None:
        """A new decision point's encoding: the jobs' embeddings ``hj`` (one
        row per job) and the pooled encoding, through the first layers."""
        (_, bg), (_, b2) = self.glob
        (_, bc), _ = self.cand
        self._pj = hj.dot(self._g_cur) + (pooled.dot(self._g_pool) + bg)
        self._hc = hj.dot(self._c_cur) + (b2.dot(self._c_g) + bc)
        if len(self._based) > 4096:
            self._based.clear()

    def score(self, k: int, cluster: np.ndarray, context: np.ndarray, base: np.ndarray, dyn: np.ndarray,
              ix: np.ndarray) -> np.ndarray:
        """The logits of job ``k``'s valid slots ``ix`` (``allocation_rows``'s
        arrays; ``point`` first), in the order of ``ix``. (``ndarray.dot``:
        the same BLAS products as ``@`` with less overhead per call.)"""
        if self.silent:
            out = add_rules(np.zeros(len(ix), dtype=np.result_type(dyn, self._v)), dyn, base, ix, self.gap, self.bonus)
            return out if self.residual is None else out + residual_scores(self.residual, cluster, base, dyn, ix,
                                                                           self.arrived)
        assert self._pj is not None and self._hc is not None, "CandidateScorer: point() first"
        z = np.concatenate((cluster, context)).dot(self._g_cc)
        z += self._pj[k]
        np.maximum(z, 0.0, out=z)
        c = z.dot(self._g_c)
        c += self._hc[k]
        e = self._based.get(id(base))
        if e is None or e[0] is not base:  # holds ``base``: its id is not reused while it is here
            e = self._based[id(base)] = (base, base.dot(self._c_rows))
        h = dyn.dot(self._c_dyn)
        h += e[1]
        h += c
        np.maximum(h, 0.0, out=h)
        out = add_rules(h.dot(self._v) + self._u, dyn, base, ix, self.gap, self.bonus)
        if self.residual is not None:
            out = out + residual_scores(self.residual, cluster, base, dyn, ix, self.arrived)
        return out
