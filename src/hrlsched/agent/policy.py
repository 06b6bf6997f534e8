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
from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, Scheduler

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
            hint=kw.get("hint"), **{k: kw[k] for k in ("worker_options", "ps_options") if k in kw},
        )
        self.dp.reset(rng)
        self.steps = 0

    def decide(self, view: ClusterView) -> Decision:
        dp = self.dp
        assert dp is not None, "HRLScheduler: reset() first"
        more = dp.begin(view)
        cached = self.part == "allocate" and self.net.static
        enc = None
        with torch.inference_mode():
            while more:
                # A static encoding is made once per point; each job then needs only its own rows.
                obs = dp.observation(full=enc is None or not cached)
                if "jobs" in obs:
                    obs = trim_jobs(obs)
                batch = {k: torch.as_tensor(v).unsqueeze(0) for k, v in obs.items()}
                if enc is None or not cached:
                    enc = self.net.encode(batch)
                if cached:  # the current job's row of the encoding, as trim_jobs keeps them
                    batch["current_job"] = batch["current_job"][:, : enc["hj"].shape[1]]
                logits, _ = self.net.heads(batch, enc, part=self.part)
                a = int(MaskedCategorical(logits, batch["action_mask"]).greedy())
                more = dp.act(a)
                self.steps += 1
        return dp.decision()
