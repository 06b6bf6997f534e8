"""The hierarchical agent's network: one encoder of the cluster shared by a
level-1 head (a score per allocation candidate) and a level-2 head (a
pointer over GPUs for a worker, over sockets for a PS), plus a value head.

Nothing is sized by the cluster or the workload, so weights trained on 64
GPUs run on 1,024:

- jobs: a shared MLP per job row, then masked self-attention over the set
  of jobs (each job sees the others it competes with);
- GPUs: a shared MLP per GPU row, then one round of message passing over
  the topology: each GPU reads the mean embedding of its PCIe switch, CPU
  socket and server (``gpu_groups``), which is how it sees who it shares a
  link with;
- sockets: their own rows plus the mean embedding of their GPUs;
- links: a shared MLP per link row, pooled (mean and max): how loaded the
  network is;
- candidates (Decima's treatment of parallelism limits): each candidate row
  (workers, PSs, architecture, mode, predicted speed ...) is an *input* of
  one shared scorer together with the job being decided and the cluster
  summary, so that worker counts are scored, not indexed by an output layer;
- optionally (``NetConfig.hint_gap``) one learned weight on each slot's
  predicted progress over the hint slot's, among the slots with the hint's
  worker count (``hint_speed_gap``): the shared scorer reads the rows one by
  one and cannot make that comparison, which is where the architecture and
  mode a job leaves open are chosen (the heuristics keep the workload's
  default). Its weight is fitted by ``hrlsched tune`` (``agent/tune.py``);
- optionally (``NetConfig.hint_bonus``) one weight added to the score of the
  hint's slot (``is_hint``): how far the agent follows the hint over its own
  scorer's preference, set with ``tune``'s ``--bonus``.

The action layout is the environments' (``hrlsched.envs``): ``[candidates |
GPUs | sockets | defer]`` (Hierarchical-v0), ``[candidates]``
(Allocation-v0) or ``[GPUs | sockets | defer]`` (Placement-v0). Logits of
actions the mask forbids are set to ``-inf`` inside the distribution
(``common.distributions.MaskedCategorical``), never after a softmax.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from hrlsched.agent.common.mlp import mlp
from hrlsched.agent.rules import GAP_SCALE
from hrlsched.envs import features as F
from hrlsched.envs.candidates import KEEP

GAP_COLUMNS = tuple(F.CANDIDATE_FEATURES.index(c) for c in ("valid", "workers", "is_hint", "speed_vs_requested"))


def feature_schema() -> dict[str, list[str]]:
    """The observation schema a network is built for (feature names per
    matrix); stored in checkpoints, and a checkpoint whose schema differs
    is refused."""
    return {
        "jobs": list(F.JOB_FEATURES), "gpus": list(F.GPU_FEATURES), "sockets": list(F.SOCKET_FEATURES),
        "links": list(F.LINK_FEATURES), "candidates": list(F.CANDIDATE_FEATURES),
        "cluster": list(F.CLUSTER_FEATURES), "context": list(F.CONTEXT_FEATURES),
        "gpu_groups": list(F.GROUP_COLUMNS),
    }


@dataclass(frozen=True)
class NetConfig:
    d: int = 64  # embedding width
    heads: int = 4
    job_layers: int = 1  # self-attention layers over jobs
    hidden: int = 128  # width of the heads' hidden layer
    # A level-1-only network encodes jobs, GPUs, sockets and links from what
    # does not change within a decision point (``STATIC``), so the encoding is
    # made once per point and only the small candidate scorer runs per job;
    # what the point's earlier choices changed reaches it through the
    # cluster, context and candidate rows.
    static_point: bool = True
    # one weight on ``hint_speed_gap`` added to the candidate scores (0 until fitted)
    hint_gap: bool = False
    # one weight on the hint slot's ``is_hint`` added to its score (0 until fitted): how strongly the
    # agent takes the hint's slot over what its scorer prefers
    hint_bonus: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


# Columns that stay fixed through a decision point (the rest follow the choices made in it).
STATIC = {
    "jobs": [i for i, c in enumerate(F.JOB_FEATURES) if c not in ("is_current", "decided", "chosen_workers")],
    "gpus": [F.GPU_FEATURES.index(c) for c in ("valid", "speed", "tasks_before")],
    "sockets": [F.SOCKET_FEATURES.index("valid")],
    "links": [i for i, c in enumerate(F.LINK_FEATURES) if c != "jobs_crossing"],
}


#: what ``HRLNet.encode`` reads of an observation (the rest, each choice's own rows, ``heads`` reads)
ENCODER_KEYS = ("jobs", "job_mask", "gpus", "gpu_mask", "gpu_groups", "sockets", "socket_mask", "links", "link_mask")


def hint_speed_gap(c: Tensor) -> Tensor:
    """Candidate rows ``c`` (..., N, F) -> (..., N): each valid slot's
    predicted progress over the request (``speed_vs_requested``) minus the
    hint slot's, for the slots with as many workers as the hint slot (its
    other architectures, modes and PS counts); 0 for the other slots and
    where the hint is *wait* or *keep* or absent."""
    iv, iw, ih, isp = GAP_COLUMNS
    hint = c[..., ih]
    h = hint.argmax(-1, keepdim=True)
    has = (hint.gather(-1, h) > 0) & (h > KEEP)
    same = (c[..., iw] == c[..., iw].gather(-1, h)) & (c[..., iv] > 0) & has
    gap = c[..., isp] - c[..., isp].gather(-1, h)
    return torch.where(same, gap, torch.zeros_like(gap))


def static_only(x: Tensor, key: str) -> Tensor:
    """``x`` with the columns that move within a decision point set to zero."""
    keep = torch.zeros(x.shape[-1], dtype=x.dtype, device=x.device)
    keep[STATIC[key]] = 1.0
    return x * keep


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``x`` (B, N, d) over rows where ``mask`` (B, N) is true."""
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp(min=1.0)


def masked_max(x: Tensor, mask: Tensor) -> Tensor:
    neg = torch.finfo(x.dtype).min
    out = x.masked_fill(~mask.unsqueeze(-1), neg).amax(1)
    return torch.where(mask.any(1, keepdim=True), out, torch.zeros_like(out))


def group_mean(h: Tensor, idx: Tensor, n_groups: int) -> Tensor:
    """Per-row mean embedding of the row's group: ``h`` (B, N, d), ``idx``
    (B, N) group index in 0..n_groups-1 or -1 (padding). Returns (B, N, d)
    and the per-group means (B, n_groups, d)."""
    B, N, d = h.shape
    valid = idx >= 0
    flat = (idx.clamp(min=0) + torch.arange(B, device=h.device).unsqueeze(1) * n_groups).reshape(-1)
    w = valid.reshape(-1, 1).to(h.dtype)
    sums = torch.zeros(B * n_groups, d, dtype=h.dtype, device=h.device).index_add_(0, flat, h.reshape(-1, d) * w)
    cnt = torch.zeros(B * n_groups, 1, dtype=h.dtype, device=h.device).index_add_(0, flat, w)
    means = sums / cnt.clamp(min=1.0)
    per_row = means[flat].reshape(B, N, d) * valid.unsqueeze(-1).to(h.dtype)
    return per_row, means.reshape(B, n_groups, d)


class JobEncoder(nn.Module):
    def __init__(self, n_feat: int, cfg: NetConfig) -> None:
        super().__init__()
        self.inp = mlp(n_feat, cfg.hidden, cfg.d)
        self.attn = nn.ModuleList(nn.MultiheadAttention(cfg.d, cfg.heads, batch_first=True)
                                  for _ in range(cfg.job_layers))
        self.norm = nn.ModuleList(nn.LayerNorm(cfg.d) for _ in range(cfg.job_layers))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.inp(x)
        pad = ~mask
        # a batch row with no valid job would make attention all -inf: let it see itself
        pad = pad & mask.any(1, keepdim=True)
        # Nothing padded (the hrl policy drops its padding rows): no mask, so that attention
        # takes the plain softmax, on a CPU several times faster than the masked one (the same
        # weights up to float rounding). Checked on a CPU only, where it costs no device sync.
        kpm: Tensor | None = pad
        if pad.device.type == "cpu" and not bool(pad.any()):
            kpm = None
        for attn, norm in zip(self.attn, self.norm):
            a, _ = attn(h, h, h, key_padding_mask=kpm, need_weights=False)
            h = norm(h + a)
        return h * mask.unsqueeze(-1).to(h.dtype)


class HRLNet(nn.Module):
    """Policy and value network for the three environments' action layouts.

    ``forward(obs)`` takes a batch of observations (dict of tensors with a
    leading batch dimension, as the environments give them) and returns the
    logits over the whole action layout (unmasked; mask with
    ``common.distributions.MaskedCategorical``) and the value."""

    def __init__(self, cfg: NetConfig = NetConfig(), allocates: bool = True, places: bool = True) -> None:
        super().__init__()
        if not (allocates or places):
            raise ValueError("HRLNet: expected a network that allocates, places, or both")
        self.cfg, self.allocates, self.places = cfg, allocates, places
        d, hid = cfg.d, cfg.hidden
        self.jobs = JobEncoder(len(F.JOB_FEATURES), cfg)
        self.gpu_in = mlp(len(F.GPU_FEATURES), hid, d)
        self.gpu_mp = mlp(4 * d, hid, d)  # own, switch, socket, server means
        self.sock_in = mlp(len(F.SOCKET_FEATURES) + d, hid, d)
        self.link_in = mlp(len(F.LINK_FEATURES), hid, d)
        n_glob = len(F.CLUSTER_FEATURES) + len(F.CONTEXT_FEATURES) + 6 * d
        self.glob = mlp(n_glob, hid, d)
        if allocates:
            self.cand = mlp(len(F.CANDIDATE_FEATURES) + 2 * d, hid, 1)
            if cfg.hint_gap:
                self.gap = nn.Parameter(torch.zeros(()))
            if cfg.hint_bonus:
                self.bonus = nn.Parameter(torch.zeros(()))
        if places:
            self.gpu_head = mlp(3 * d, hid, 1)
            self.sock_head = mlp(3 * d, hid, 1)
            self.defer = nn.Linear(d, 1)
        self.value = mlp(2 * d, hid, 1)

    @property
    def static(self) -> bool:
        """Whether the encoding reads only what a decision point keeps fixed
        (a level-1-only network with ``static_point``): then ``encode`` may
        be computed once per point and reused by ``heads`` for every job."""
        return self.cfg.static_point and not self.places

    def forward(self, obs: dict[str, Tensor], part: str = "all", valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``part``: the action layout to score: ``"all"`` (the network's
        own: candidates and/or placement), ``"allocate"`` (Allocation-v0:
        candidates only) or ``"place"`` (Placement-v0: GPUs, sockets, defer);
        ``valid``: as ``heads``."""
        return self.heads(obs, self.encode(obs), part, valid)

    def forward_by_point(self, obs: dict[str, Tensor], point_obs: dict[str, Tensor], point: Tensor,
                         part: str = "all", valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``forward`` of a static network on a batch of steps that share
        decision points: ``point_obs`` holds each point's observation (what
        ``encode`` reads, ``ENCODER_KEYS``), ``point`` (B,) each step's row
        there, ``obs`` each step's own rows; each point is encoded once.
        The same outputs as ``forward`` on the steps' whole observations,
        since ``encode`` reads only what a point keeps fixed."""
        if not self.static:
            raise ValueError("forward_by_point: the network's encoding is not static (it places, or static_point "
                             "is off): encode each step")
        enc = self.encode(point_obs)
        # each step's current job's embedding alone (the one row ``heads`` reads of the jobs'), not the point's
        # every job, GPU and socket copied to each step
        cur = obs["current_job"].bool()
        hj = enc["hj"][point, cur.to(torch.int64).argmax(1)].unsqueeze(1)
        return self.heads({**obs, "current_job": cur.any(1, keepdim=True)}, {"hj": hj, "pooled": enc["pooled"][point]},
                          part, valid)

    def encode(self, obs: dict[str, Tensor]) -> dict[str, Tensor]:
        """Embeddings of the jobs, GPUs, sockets and links, and their pools."""
        x = {k: static_only(obs[k], k) if self.static else obs[k] for k in ("jobs", "gpus", "sockets", "links")}
        jm = obs["job_mask"].bool()
        gm = obs["gpu_mask"].bool()
        sm = obs["socket_mask"].bool()
        lm = obs["link_mask"].bool()
        hj = self.jobs(x["jobs"], jm)
        hg = self.gpu_in(x["gpus"])
        groups = obs["gpu_groups"].long()
        G = hg.shape[1]
        sw, _ = group_mean(hg, groups[..., 0], G)
        S = x["sockets"].shape[1]
        so, so_means = group_mean(hg, groups[..., 1], S)
        sv, _ = group_mean(hg, groups[..., 2], G)
        hg = hg + self.gpu_mp(torch.cat([hg, sw, so, sv], -1))
        hg = hg * gm.unsqueeze(-1).to(hg.dtype)
        hs = self.sock_in(torch.cat([x["sockets"], so_means], -1)) * sm.unsqueeze(-1).to(hg.dtype)
        hl = self.link_in(x["links"])
        pooled = torch.cat([masked_mean(hj, jm), masked_mean(hg, gm), masked_mean(hs, sm), masked_mean(hl, lm),
                            masked_max(hl, lm)], -1)
        return {"hj": hj, "hg": hg, "hs": hs, "pooled": pooled}

    def heads(self, obs: dict[str, Tensor], enc: dict[str, Tensor], part: str = "all",
              valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Logits over ``part``'s action layout and the value, from ``encode``'s
        output and the observation's per-choice rows (cluster, context, the
        current job, candidates). ``valid`` (B, actions; training's masks):
        score only the candidate slots it allows (a fifth of them, typically),
        the others' logits -inf, as the masked distribution makes them."""
        hj = enc["hj"]
        cur = (hj * obs["current_job"].unsqueeze(-1).to(hj.dtype)).sum(1)
        g = self.glob(torch.cat([obs["cluster"], obs["context"], enc["pooled"].expand(cur.shape[0], -1), cur], -1))
        gc = torch.cat([g, cur], -1)
        parts = []
        if part not in ("all", "allocate", "place"):
            raise ValueError(f"part: expected 'all', 'allocate' or 'place', got {part!r}")
        if self.allocates and part != "place":
            c = obs["candidates"]
            if valid is None:
                score = self.cand(torch.cat([c, gc.unsqueeze(1).expand(-1, c.shape[1], -1)], -1)).squeeze(-1)
            else:
                score = self._valid_scores(c, gc, valid[:, :c.shape[1]].bool())
            if self.cfg.hint_gap:
                score = score + GAP_SCALE * self.gap * hint_speed_gap(c)
            if self.cfg.hint_bonus:
                score = score + self.bonus * c[..., GAP_COLUMNS[2]]
            parts.append(score)
        if self.places and part != "allocate":
            hg, hs = enc["hg"], enc["hs"]
            G, S = hg.shape[1], hs.shape[1]
            parts.append(self.gpu_head(torch.cat([hg, gc.unsqueeze(1).expand(-1, G, -1)], -1)).squeeze(-1))
            parts.append(self.sock_head(torch.cat([hs, gc.unsqueeze(1).expand(-1, S, -1)], -1)).squeeze(-1))
            parts.append(self.defer(g))
        if not parts:
            raise ValueError(f"part {part!r}: this network has no such head")
        return torch.cat(parts, -1), self.value(gc).squeeze(-1)

    def _valid_scores(self, c: Tensor, gc: Tensor, valid: Tensor) -> Tensor:
        """The candidate scorer on the slots ``valid`` (B, N) of the rows ``c``
        (B, N, F) only, with its first layer split into the rows' part and
        the step's (``gc``, once per step): the same function as on every
        row (sums in another order: equal up to float rounding); -inf elsewhere."""
        first, last = self.cand[0], self.cand[-1]
        nf = c.shape[-1]
        step = nn.functional.linear(gc, first.weight[:, nf:], first.bias)
        rows = nn.functional.linear(c[valid], first.weight[:, :nf]) + step[valid.nonzero()[:, 0]]
        out = last(self.cand[1:-1](rows)).squeeze(-1)
        return c.new_full(valid.shape, float("-inf")).index_put((valid,), out)


def count_parameters(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())
