"""DL2 (Peng, Bao, Chen, Wu, Meng, Lin, "DL2: A Deep Learning-Driven
Scheduler for Deep Learning Clusters", IEEE TPDS 2021; arXiv:1909.06040;
code pengyanghua/DL2), level 1 only, on this project's engine.

What it follows from the paper:

- State: the J jobs of its window (the active jobs in arrival order; later
  ones wait in the backlog), per job: its type (one-hot over the 8 DL2
  models), its time in the system, the estimate of its remaining work, its
  dominant share, and the workers and PSs allocated to it so far at this
  decision point. All as one flat vector into fully connected layers.
- Actions: 3J+1: one more worker to job j, one more PS, one more of each
  (a "bundle"), or stop. At each decision point the allocations are built
  from nothing by repeated inferences, until the network stops or nothing
  more fits.
- Reward: the sum over jobs of the share of their total work done during
  the step (the paper's normalised epochs, with work in samples); every
  inference of a decision point gets that point's reward, and returns are
  discounted over decision points (gamma 0.99).
- Training: supervised warm-up on the decisions of DRF (cross-entropy of
  DRF's increments: progressive filling, a PS per 4 workers, up to the
  requested GPUs), then actor-critic (a policy network and a value
  network, advantage = return - value), with experience replay (the newest
  ``replay`` samples, minibatches drawn uniformly), an entropy bonus, and
  job-aware exploration: with probability epsilon an inference is replaced
  by one that fixes a poorly resourced job (a job with nothing, a PS job
  short of PSs, or a job far below the best served one).
- Placement: its own rule, each job on the least-loaded servers (most free
  GPUs first: the ``balance`` placement), a job whose allocation did not
  change staying where it runs.

Where the public code departs from the paper or is broken, this follows the
paper: invalid actions are masked with -inf *before* the softmax, and the
loss and the entropy use the same masked distribution (the code multiplied
the softmax output by the mask, renormalised for sampling, and trained on
the unmasked output); the DRF warm-up is on by default (off in the code's
``parameters.py``); no one-worker-one-PS bundle is handed to every job at
the start of a slot (``ASSIGN_BUNDLE`` in the code, not in the paper;
here the network chooses, though *stop* waits until every window job that
fits has a worker, see below), and no sample injection or reward-sorted priority replay (code options, not in
the paper).

Simplified or adapted (also in docs/policies.md):

- decision points at arrivals and completions (as ``drf``), not fixed
  20-minute slots: with the default workload's 30-minute median job, a
  slot would make a job wait 10 minutes on average, which no baseline pays;
- masks the paper leaves implicit: a PS job starts with a bundle (a worker
  without a PS cannot run), PSs never outnumber workers, at most
  ``max_workers`` (16, the code's ``MAX_NUM_WORKERS``) workers per job,
  and *stop* is offered only once every window job that fits has at least
  one worker (decision points come at arrivals and completions only: a job
  left out with the cluster idle would never be asked about again);
- feasibility is checked on the cluster's total free GPUs, cores and memory
  (as DRF); the final placement keeps running jobs whose allocation did not
  change (no restart), and a job the servers cannot hold after all waits;
- features added to the paper's: the job's requested GPUs and whether its
  workers are still below them (DRF's rule stops a job at its request: with
  this flag the warm-up imitates DRF's increments at about 94% on a
  held-back ``default`` episode, as the training log prints), whether it is
  a PS job, its workers and
  PSs running before the decision, the predicted normalised progress rate
  of its allocation so far and the predicted gain of each of its three
  actions (the predictor's speeds alone, ``ClusterView.perf``), and the
  free share of each resource and the backlog length;
- the network: one MLP shared by the window's slots scores each job's
  three actions from its row, the global features and the window's mean
  and max rows, and MLPs on that context give *stop* and the value (the
  same inputs and 3J+1 outputs as the paper's fully connected network,
  which ``net: fc`` keeps);
- training signal: the paper's reward, with potential-based shaping
  (Ng, Harada, Russell, ICML'99; same optimal policies) by the predicted
  normalised progress rate of the allocation so far, so that each increment
  gets its own credit, and GAE(0.95) advantages over the inferences;
- replayed samples are weighted by truncated importance weights
  min(1, pi(a|s) / mu(a|s)) (ACER, Wang et al., ICLR'17), mu the
  probability with which the action was taken (exploration included): the
  paper replays without them, and here explored or stale actions with a
  positive advantage then pulled the policy toward uniform;
- remaining work is the predictor's (``ClusterView.remaining``), as hours
  alone at the requested size; no batch normalisation; advantages are
  normalised per minibatch; inside the engine the policy is greedy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hrlsched.agent.common import returns
from hrlsched.agent.common.distributions import MaskedCategorical, masked_logits, masked_softmax
from hrlsched.agent.common.mlp import NumpyMLP, mlp
from hrlsched.agent.common.training_run import check_fields
from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.catalogue import DL2_MODELS, ModelProfile, get_profile
from hrlsched.policies.base import Allocation
from hrlsched.policies.placement.balance import BalancePlacement
from hrlsched.rivals import actor_critic as ac

HOUR = 3600.0
METRICS = ["episode", "seed", "inferences", "return", "epsilon", "rollout_s", "pg", "vf", "ent", "wall_s",
          "valid_avg_jct_h", "best_valid_avg_jct_h"]  # metrics.csv columns
SCALE = 16.0  # workers and PSs are divided by this
WORKER, PS, BUNDLE = 0, 1, 2
JOB_FEATURES = ("valid", *(f"type:{m}" for m in DL2_MODELS), "stay_h", "remaining_h", "done", "dom_share",
                "workers", "ps", "requested", "unmet", "is_ps", "running_workers", "running_ps",
                "rate", "gain_worker", "gain_ps", "gain_bundle")
RATE_SCALE = 10.0  # normalised progress per hour is divided by this
GLOBAL_FEATURES = ("free_gpus", "free_cores", "free_mem", "window_jobs", "backlog")
_COL = {n: i for i, n in enumerate(JOB_FEATURES)}


def features() -> dict[str, list[str]]:
    return {"job": list(JOB_FEATURES), "global": list(GLOBAL_FEATURES)}


@dataclass
class DL2Config(ac.ActorCriticConfig):
    """DL2's settings beyond ``ActorCriticConfig``'s (whose defaults are
    DL2's): the budget's ``steps`` are inferences, ``gamma`` is per slot of
    ``slot_min`` simulated minutes (the paper's slot: 20), ``replay`` the
    paper's larger setting (an episode is ~15,000 inferences), the warm-up's
    teacher DRF, and GAE's reward comes at a point's last inference."""

    window: int = 40  # J (the paper's large-scale setting)
    max_workers: int = 16
    net: str = "shared"  # or "fc" (the paper's flat network)
    value_hidden: int = 64
    reward: str = "progress"  # the paper's; "jct": minus jobs in the system x time (Decima)
    slot_min: float = 20.0
    shaping_h: float = 1.0  # potential-based shaping: this x the predicted progress per hour (0: none)
    value_scale: float = 10.0

    def validate(self) -> None:
        super().validate()
        if self.net not in ("shared", "fc"):
            raise ValueError(f"net: expected 'shared' or 'fc', got {self.net!r}")
        if self.reward not in ("progress", "jct"):
            raise ValueError(f"reward: expected 'progress' or 'jct', got {self.reward!r}")
        check_fields(self, ("window", "max_workers", "value_hidden"), lambda v: int(v) >= 1, "a positive integer")
        check_fields(self, ("slot_min", "value_scale"), lambda v: float(v) > 0, "a positive value")
        check_fields(self, ("shaping_h",), lambda v: float(v) >= 0, "a value >= 0")

    @property
    def n_inputs(self) -> int:
        return self.window * len(JOB_FEATURES) + len(GLOBAL_FEATURES)

    @property
    def n_actions(self) -> int:
        return 3 * self.window + 1


class DL2Net(nn.Module):
    """DL2's two networks over the flat state (the J job rows, then the
    global features): a policy with 3J+1 logits and a value.

    ``net: fc`` is the paper's: fully connected layers over the flat vector
    (2 hidden layers each). ``net: shared`` (the default) reads the same
    inputs and gives the same 3J+1 outputs, but scores each job's three
    actions with one MLP applied to every window slot (its row, the global
    features and the window's mean and max rows as context), and *stop* and
    the value with MLPs on that context (the flat network needs a
    weight per window slot for what is the same rule for every job)."""

    def __init__(self, cfg: DL2Config) -> None:
        super().__init__()
        self.kind, self.J = cfg.net, cfg.window
        F, G = len(JOB_FEATURES), len(GLOBAL_FEATURES)
        self.F, self.G = F, G
        if cfg.net == "fc":
            self.policy = mlp(cfg.n_inputs, cfg.hidden, cfg.hidden, cfg.n_actions)
            self.value = mlp(cfg.n_inputs, cfg.value_hidden, cfg.value_hidden, 1)
        else:
            self.job = mlp(F + G + 2 * F, cfg.hidden, cfg.hidden, 3)
            self.stop = mlp(G + 2 * F, cfg.hidden, 1)
            self.value = mlp(G + 2 * F, cfg.value_hidden, cfg.value_hidden, 1)

    def _context(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, J, F = x.shape[0], self.J, self.F
        jobs = x[:, : J * F].reshape(B, J, F)
        valid = jobs[:, :, :1]
        mean = (jobs * valid).sum(1) / valid.sum(1).clamp(min=1.0)
        mx = (jobs * valid).max(1).values  # features are >= 0; padded rows are 0
        return jobs, torch.cat([x[:, J * F:], mean, mx], -1)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "fc":
            return self.policy(x)
        jobs, ctx = self._context(x)
        per = self.job(torch.cat([jobs, ctx[:, None, :].expand(-1, self.J, -1)], -1))  # (B, J, 3)
        return torch.cat([per.reshape(x.shape[0], -1), self.stop(ctx)], -1)

    def value_of(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "fc":
            return self.value(x).squeeze(-1)
        return self.value(self._context(x)[1]).squeeze(-1)

    def policy_params(self) -> list[nn.Parameter]:
        if self.kind == "fc":
            return list(self.policy.parameters())
        return [*self.job.parameters(), *self.stop.parameters()]

    def value_params(self) -> list[nn.Parameter]:
        return list(self.value.parameters())


class NumpyPolicy:
    """``DL2Net.logits`` for one state, in numpy (inside the engine)."""

    def __init__(self, net: DL2Net) -> None:
        self.kind, self.J, self.F = net.kind, net.J, net.F
        if net.kind == "fc":
            self.policy = NumpyMLP(net.policy)
        else:
            self.job, self.stop = NumpyMLP(net.job), NumpyMLP(net.stop)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "fc":
            return self.policy(x)
        J, F = self.J, self.F
        jobs = x[: J * F].reshape(J, F)
        valid = jobs[:, :1]
        vj = jobs * valid
        ctx = np.concatenate([x[J * F:], vj.sum(0) / max(float(valid.sum()), 1.0), vj.max(0)]).astype(np.float32)
        per = self.job(np.concatenate([jobs, np.broadcast_to(ctx, (J, ctx.size))], 1))
        return np.concatenate([per.ravel(), self.stop(ctx)])


# ------------------------------------------------------------ decision point
class Point:
    """One DL2 decision point: the window's allocations built by increments.

    ``mask()`` the valid actions (3J+1, bool), ``state()`` the network's
    input, ``act(a)`` applies one (True while there is a choice left),
    ``allocations()`` the result."""

    def __init__(self, view: ClusterView, cfg: DL2Config, cache: dict[tuple[int, int, int], float],
                 profiles: dict[str, ModelProfile]) -> None:
        J = cfg.window
        self.view, self.J, self.cache = view, J, cache
        jobs = view.jobs[:J]
        self.jobs = jobs
        n = self.n = len(jobs)
        topo = view.topology
        self.max_w = int(min(cfg.max_workers, topo.n_gpus))
        self.cap = np.array([topo.n_gpus, topo.server_cores.sum(), topo.server_mem_gb.sum()], dtype=float)
        self.free = self.cap.copy()
        self.dw = np.zeros((J, 3))
        self.dp = np.zeros((J, 3))
        self.is_ps = np.zeros(J, dtype=bool)
        self.valid = np.zeros(J, dtype=bool)
        self.valid[:n] = True
        self.req = np.zeros(J, dtype=np.int64)
        self.w = np.zeros(J, dtype=np.int64)
        self.p = np.zeros(J, dtype=np.int64)
        X = np.zeros((J, len(JOB_FEATURES)), dtype=np.float32)
        age = view.age_s()
        for k, job in enumerate(jobs):
            prof = profiles.get(job.model)
            if prof is None:
                prof = profiles[job.model] = get_profile(job.model, view.catalogue)
            self.dw[k] = (1.0, prof.worker_cores, prof.worker_mem_gb)
            self.dp[k] = (0.0, prof.ps_cores, prof.ps_mem_gb)
            self.is_ps[k] = job.arch == "ps"
            self.req[k] = job.requested_gpus
            t = f"type:{job.model}"
            if t in _COL:
                X[k, _COL[t]] = 1.0
            iso = self._speed(k, job.requested_gpus, job.num_ps_requested)
            rem, done = float(view.remaining[k]), float(view.progress[k])
            X[k, _COL["remaining_h"]] = math.log1p(rem / max(iso, 1e-12) / HOUR)
            X[k, _COL["done"]] = done / max(done + rem, 1e-12)
            X[k, _COL["stay_h"]] = math.log1p(age[k] / HOUR)
            pl = view.placements[k]
            if pl is not None:
                X[k, _COL["running_workers"]] = pl.n_workers / SCALE
                X[k, _COL["running_ps"]] = pl.n_ps / SCALE
        X[:n, _COL["valid"]] = 1.0
        X[:n, _COL["requested"]] = self.req[:n] / SCALE
        X[:n, _COL["unmet"]] = 1.0  # workers still below the request (updated by act)
        X[:n, _COL["is_ps"]] = self.is_ps[:n]
        self.X = X
        # predicted normalised progress per hour at (w, p): speed alone / total work
        self.per_hour = np.zeros(J)
        self.rate = np.zeros(J)  # predicted normalised progress per hour at the allocation so far
        for k in range(n):
            self.per_hour[k] = HOUR / max(float(view.progress[k] + view.remaining[k]), 1e-12)
        for k in range(n):
            self._rates(k)
        self.g = np.zeros(len(GLOBAL_FEATURES), dtype=np.float32)
        self.g[3] = n / J
        self.g[4] = max(len(view.jobs) - J, 0) / J
        self._update_global()
        self.done = False
        self._mask = np.zeros(3 * J + 1, dtype=bool)
        self._compute_mask()
        if not self._mask[:-1].any():
            self.done = True

    def _speed(self, k: int, w: int, p: int) -> float:
        """Predicted speed of window job k alone at (w, p) (0 if it cannot run)."""
        job = self.jobs[k]
        if w < 1 or (job.arch == "ps" and p < 1):
            return 0.0
        key = (job.job_id, int(w), int(p))
        v = self.cache.get(key)
        if v is None:
            v = self.cache[key] = float(self.view.perf.isolated_speed(job, int(w), int(p),
                                                                     int(self.view.batch_sizes[k])))
        return v

    def _rates(self, k: int) -> None:
        """The rate of job k at its allocation so far and the gain of each action."""
        w, p, ph, X = int(self.w[k]), int(self.p[k]), self.per_hour[k] / RATE_SCALE, self.X
        now = self._speed(k, w, p)
        self.rate[k] = now * self.per_hour[k]
        X[k, _COL["rate"]] = min(now * ph, 2.0)
        for name, (dw, dp) in (("gain_worker", (1, 0)), ("gain_ps", (0, 1)), ("gain_bundle", (1, 1))):
            ok = w + dw <= self.max_w and (dp == 0 or self.is_ps[k]) and p + dp <= max(w + dw, 1)
            X[k, _COL[name]] = float(np.clip((self._speed(k, w + dw, p + dp) - now) * ph, -2.0, 2.0)) if ok else 0.0

    @property
    def potential(self) -> float:
        """The predicted normalised progress per hour of the allocation so far."""
        return float(self.rate.sum())

    # -- state
    def _update_global(self) -> None:
        self.g[:3] = self.free / np.maximum(self.cap, 1e-9)

    def state(self) -> np.ndarray:
        return np.concatenate([self.X.ravel(), self.g])

    def mask(self) -> np.ndarray:
        return self._mask

    def _compute_mask(self) -> None:
        J, free = self.J, self.free + 1e-9
        fw = (self.dw <= free).all(1)
        fp = (self.dp <= free).all(1)
        fb = (self.dw + self.dp <= free).all(1)
        room = self.w < self.max_w
        m = self._mask
        m[0:3 * J:3] = self.valid & room & fw & (~self.is_ps | (self.p >= 1))
        m[1:3 * J:3] = self.valid & self.is_ps & (self.p >= 1) & (self.p < self.w) & fp
        m[2:3 * J:3] = self.valid & self.is_ps & room & fb
        # stop only once every window job that can start runs (the public
        # code hands each job a worker and a PS first, ASSIGN_BUNDLE)
        first = np.where(self.is_ps, m[2:3 * J:3], m[0:3 * J:3])
        m[-1] = not (first & (self.w == 0)).any()

    # -- actions
    def act(self, a: int) -> bool:
        a = int(a)
        if not (0 <= a < self._mask.size) or not self._mask[a]:
            raise ValueError(f"DL2: action {a} is masked at this point")
        if a == 3 * self.J:
            self.done = True
            return False
        k, kind = divmod(a, 3)
        if kind in (WORKER, BUNDLE):
            self.w[k] += 1
            self.free -= self.dw[k]
        if kind in (PS, BUNDLE):
            self.p[k] += 1
            self.free -= self.dp[k]
        X = self.X
        X[k, _COL["workers"]] = self.w[k] / SCALE
        X[k, _COL["unmet"]] = float(self.w[k] < self.req[k])
        X[k, _COL["ps"]] = self.p[k] / SCALE
        X[k, _COL["dom_share"]] = float(np.max((self.w[k] * self.dw[k] + self.p[k] * self.dp[k]) / self.cap))
        self._rates(k)
        self._update_global()
        self._compute_mask()
        if not self._mask[:-1].any():
            self.done = True
            return False
        return True

    def held_back(self) -> np.ndarray:
        """The window's jobs below their request that could still take a
        worker (or a worker and a PS) when the point ended (bool, ``n``):
        where it ended on *stop* with such a job, the network held it back,
        and the GPUs it could have used stay idle until the next point."""
        n, m = self.n, self._mask
        grow = m[0:3 * n:3] | m[2:3 * n:3]
        return (self.w[:n] < self.req[:n]) & grow

    def allocations(self) -> dict[int, Allocation]:
        order = np.argsort(-self.w[: self.n], kind="stable")
        return {self.jobs[k].job_id: Allocation(int(self.w[k]), int(self.p[k])) for k in order if self.w[k] > 0}

    # -- the heuristics that act in DL2's action space
    def drf_action(self, workers_per_ps: int = 4) -> int:
        """DRF's next increment (progressive filling, as ``policies.drf``):
        the job with the smallest dominant share that can still grow toward
        its requested GPUs, a worker, with a PS when its workers need one
        more; stop when none can."""
        m, J = self._mask, self.J
        share = self.X[:, _COL["dom_share"]]
        best, best_key = -1, (math.inf, math.inf)
        for k in range(self.n):
            if self.w[k] >= self.req[k]:
                continue
            if self.is_ps[k]:
                need_ps = self.p[k] < max(1, -(-(self.w[k] + 1) // workers_per_ps))
                a = 3 * k + (BUNDLE if need_ps else WORKER)
            else:
                a = 3 * k + WORKER
            if not m[a]:
                continue
            key = (float(share[k]), float(self.jobs[k].arrival_s))
            if key < best_key:
                best, best_key = a, key
        if best >= 0:
            return best
        return 3 * J if m[3 * J] else int(np.flatnonzero(m)[0])

    def explore_candidates(self) -> list[int]:
        """Job-aware exploration: the actions that fix a poorly resourced job
        (one with nothing, a PS job short of PSs, or one far below the best
        served job), drawn uniformly; empty when no job is."""
        m, n = self._mask, self.n
        if n == 0:
            return []
        tasks = self.w[:n] + self.p[:n]
        cands: list[int] = []
        for k in range(n):
            wk, pk = int(self.w[k]), int(self.p[k])
            if tasks[k] == 0:
                cands.append(3 * k + (BUNDLE if self.is_ps[k] else WORKER))
            elif self.is_ps[k] and wk > 4 * pk:
                cands.append(3 * k + PS)
            elif tasks.max() > 4 * tasks[k]:
                cands += [3 * k + WORKER, 3 * k + BUNDLE] if self.is_ps[k] else [3 * k + WORKER]
        return [a for a in cands if m[a]]


# ---------------------------------------------------------------- scheduler
CHECKPOINTS = ac.CheckpointKind("dl2", features(), DL2Config, DL2Net, "rivals/checkpoints/dl2-default.pt",
                                ("sl_done",))


class DL2Scheduler(ac.ActorCriticScheduler):
    """DL2 inside the engine: at each decision point (arrivals and
    completions) the window's allocations are built by the policy network's
    increments (greedy, or sampled in training), then placed on the
    least-loaded servers. ``act``: "greedy", "sample", "drf" (the teacher)
    or "random"."""

    name = "dl2"
    checkpoints = CHECKPOINTS
    reads_work = True  # its state holds each job's predicted remaining work (contract.Scheduler)

    def __init__(self, checkpoint: str | Path | None = None, *, net: DL2Net | None = None,
                 cfg: DL2Config | None = None, act: str = "greedy") -> None:
        super().__init__(checkpoint, net=net, cfg=cfg, act=act)
        self.placement = BalancePlacement()

    def set_net(self, net: DL2Net) -> None:
        self.policy = NumpyPolicy(net)

    def set_window(self, window: int) -> None:
        """Decide on ``window`` job slots instead of the checkpoint's (J, the
        active jobs in arrival order; the later ones wait in the backlog).
        The shared network scores every slot with the same weights, so it
        runs on any J, e.g. one scaled with a larger cluster; the paper's
        flat one (``net: fc``) has inputs per slot of its training J."""
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window: expected a positive integer, got {window!r}")
        if self.cfg.net != "shared":
            raise ValueError(f"window: the checkpoint's network (net: {self.cfg.net}) has inputs per job slot of "
                             f"its window ({self.cfg.window}); only net: shared runs with another window")
        self.cfg = replace(self.cfg, window=window)
        self.policy.J = window

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.placement.reset(topology, rng)
        self.cache: dict[tuple[int, int, int], float] = {}
        self.profiles: dict[str, ModelProfile] = {}
        self.inferences = 0
        self.unplaced = 0
        self.states: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.actions: list[int] = []
        self.teacher: list[int] = []
        self.point_of: list[int] = []
        self.potential: list[float] = []
        self.mus: list[float] = []  # behaviour probability of each recorded action
        self.points = 0

    def choose(self, pt: Point) -> int:
        if self.act == "drf":
            return pt.drf_action()
        if self.act == "random":  # uniform over the valid actions (a baseline)
            return int(self.rng.choice(np.flatnonzero(pt.mask())))
        logits = self.policy(pt.state())
        if self.act == "greedy":
            return int(np.argmax(masked_logits(logits, pt.mask())))
        p = masked_softmax(logits, pt.mask())
        cands = pt.explore_candidates() if self.epsilon > 0 else []
        if cands and self.rng.random() < self.epsilon:
            a = cands[int(self.rng.integers(len(cands)))]
        else:
            a = int(self.rng.choice(p.size, p=p))
        # the behaviour probability of a (the replay's importance weights)
        self.mu = float(p[a]) if not cands else (
            (1 - self.epsilon) * float(p[a]) + self.epsilon * cands.count(a) / len(cands))
        return a

    def decide(self, view: ClusterView) -> Decision:
        pt = Point(view, self.cfg, self.cache, self.profiles)
        while not pt.done:
            self.mu = 1.0
            a = self.choose(pt)
            if self.recording:
                self.mus.append(self.mu)
                self.states.append(pt.state().astype(np.float16))
                self.masks.append(pt.mask().copy())
                self.actions.append(a)
                self.point_of.append(self.points)
                self.potential.append(pt.potential)
            pt.act(a)
            self.inferences += 1
        self.points += 1
        allocs = pt.allocations()
        placements = self.placement.place(view, allocs)
        self.unplaced += len(allocs) - len(placements)
        return Decision(placements=placements)


# ------------------------------------------------------------------ training
@dataclass
class Episode:
    states: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    point_of: np.ndarray
    potential: np.ndarray  # per inference, before it
    mu: np.ndarray  # behaviour probability of each action
    rewards: np.ndarray  # per decision point
    dts: np.ndarray  # simulated seconds of each decision point's step
    avg_jct_s: float
    finished: bool
    inferences: int


def run_episode(pool: Any, wseed: int, sched: DL2Scheduler, cfg: DL2Config, record: bool,
                horizon_s: float | None, episode_seed: int = 0) -> Episode:
    """One episode of ``sched`` on the workload of ``wseed``; rewards per
    decision point (the paper's normalised progress, or minus job-hours)."""
    sim = pool.simulation(wseed, 1, "events")
    view = sim.reset(episode_seed)
    sched.reset(sim.topo, np.random.default_rng(episode_seed))
    sched.recording = record
    total = sim.total
    rewards, dts = [], []
    job_s = 0.0
    while view is not None:
        before = sim.state.progress.copy()
        out = sim.step(sched.decide(view))
        job_s += out.job_seconds
        if cfg.reward == "progress":  # the share of each job's work done during the step
            rewards.append(float(((sim.state.progress - before) / total).sum()))
        else:
            rewards.append(-out.job_seconds / (HOUR * 10.0))
        dts.append(out.elapsed_s)
        view = out.view
        if horizon_s is not None and sim.state.time_s >= horizon_s:
            break
    st = sim.state
    arrived = len(sim.jobs) if view is None else int(st.next_arrival)
    J = 3 * cfg.window + 1
    return Episode(
        states=np.asarray(sched.states, dtype=np.float16).reshape(-1, cfg.n_inputs),
        masks=np.asarray(sched.masks, dtype=bool).reshape(-1, J),
        actions=np.asarray(sched.actions, dtype=np.int64),
        point_of=np.asarray(sched.point_of, dtype=np.int64), potential=np.asarray(sched.potential),
        mu=np.asarray(sched.mus, dtype=np.float32),
        rewards=np.asarray(rewards), dts=np.asarray(dts),
        avg_jct_s=job_s / max(arrived, 1), finished=view is None, inferences=sched.inferences)


def evaluate(pool: Any, net: DL2Net, cfg: DL2Config, seeds: list[int]) -> float:
    """Mean average JCT of the greedy policy over whole episodes of ``seeds``."""
    sched = DL2Scheduler(net=net, cfg=cfg, act="greedy")
    return float(np.mean([run_episode(pool, s, sched, cfg, False, None).avg_jct_s for s in seeds]))


class Trainer(ac.ActorCriticTrainer):
    """DL2's training: the DRF warm-up (``supervised``), then actor-critic
    with experience replay (``rivals.actor_critic``)."""

    checkpoints = CHECKPOINTS
    scheduler = DL2Scheduler
    metrics = METRICS
    progress_field = ("inferences", "inferences")
    warm_up_after_init = False  # (DRF's warm-up would undo the weights it starts from)

    def warm_up(self) -> None:
        if not self.sl_done and self.cfg.sl_episodes > 0:
            self.supervised()
            self.save()

    # -- supervised warm-up on DRF
    def supervised(self) -> None:
        cfg = self.cfg
        seeds = [int(s) for s in self.rng.choice(cfg.train_seeds, size=min(cfg.sl_episodes, len(cfg.train_seeds)),
                                                 replace=False)]
        teacher = DL2Scheduler(net=self.net, cfg=cfg, act="drf")
        t0 = time.time()
        eps = [run_episode(self.pool, s, teacher, cfg, True, self.horizon_s()) for s in seeds]
        valid = run_episode(self.pool, cfg.valid_seeds[0], teacher, cfg, True, None)
        X = np.concatenate([e.states for e in eps])
        M = np.concatenate([e.masks for e in eps])
        A = np.concatenate([e.actions for e in eps])
        self.log(f"DRF warm-up: {A.size} teacher inferences on seeds {seeds} ({time.time() - t0:.0f} s); "
                 f"validation on seed {cfg.valid_seeds[0]}: {valid.actions.size}")
        opt = torch.optim.Adam(self.net.policy_params(), lr=cfg.sl_lr)
        vx = torch.from_numpy(valid.states.astype(np.float32))
        vm, va = torch.from_numpy(valid.masks), torch.from_numpy(valid.actions)

        def cross_entropy(idx: np.ndarray) -> torch.Tensor:
            d = MaskedCategorical(self.net.logits(torch.from_numpy(X[idx].astype(np.float32))),
                                  torch.from_numpy(M[idx]))
            return -d.log_prob(torch.from_numpy(A[idx])).mean()

        for epoch in range(cfg.sl_epochs):
            losses = self.descend(opt, A.size, cfg.sl_minibatch, cross_entropy)
            with torch.no_grad():
                d = MaskedCategorical(self.net.logits(vx), vm)
                acc = float((d.greedy() == va).float().mean())
                vloss = float(-d.log_prob(va).mean())
            self.log(f"  sl epoch {epoch + 1}: loss {np.mean(losses):.4f}, validation loss {vloss:.4f}, "
                     f"accuracy {acc:.3f}")
        # The critic is fitted to the DRF episodes' (shaped) returns, so that the first
        # advantages are not measured against an untrained value.
        G = np.concatenate([self.advantages(e, lam=1.0)[1] for e in eps]).astype(np.float32)
        vg = torch.from_numpy(self.advantages(valid, lam=1.0)[1].astype(np.float32))

        def value_error(idx: np.ndarray) -> torch.Tensor:
            x = torch.from_numpy(X[idx].astype(np.float32))
            return (self.net.value_of(x) - torch.from_numpy(G[idx]) / cfg.value_scale).pow(2).mean()

        for _ in range(max(cfg.sl_epochs // 3, 1)):
            self.descend(self.opt_v, A.size, cfg.sl_minibatch, value_error)
        with torch.no_grad():
            vloss = float((self.net.value_of(vx) - vg / cfg.value_scale).pow(2).mean())
            var = float((vg / cfg.value_scale).var())
        self.log(f"  critic on the DRF returns: validation loss {vloss:.4f} (variance of the returns {var:.4f})")
        self.sl_done = True
        self.save("sl.pt")

    # -- actor-critic with experience replay
    def advantages(self, ep: Episode, lam: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """GAE over the episode's inferences. A decision point's reward comes
        after its last inference; the discount is gamma per ``slot_min`` of
        simulated time (1 between the inferences of a point). With
        ``shaping_h``, each inference also gets the change of the potential
        shaping_h x (predicted normalised progress per hour of the allocation
        so far), and a point's last inference its reward minus the potential
        it leaves (the next point starts from no allocation, potential 0):
        potential-based shaping (Ng, Harada, Russell, ICML'99), which leaves
        the discounted return's optimal policies unchanged and gives each
        increment its own credit."""
        cfg = self.cfg
        lam = cfg.gae_lambda if lam is None else lam
        with torch.no_grad():
            V = self.net.value_of(torch.from_numpy(ep.states.astype(np.float32))).numpy().astype(np.float64)
        V *= cfg.value_scale
        T, P = ep.rewards.size, ep.point_of
        logd = np.log(cfg.gamma) * ep.dts / (cfg.slot_min * 60.0)  # log discount of each point's step
        L = np.concatenate([[0.0], np.cumsum(logd)])  # log discount from the start to each point
        C = np.concatenate([[0.0], np.cumsum(np.exp(L[:-1]) * ep.rewards)])
        nxt = np.append(P[1:], T)
        disc = np.exp(L[nxt] - L[P])
        last = nxt > P
        seg = np.where(last, (C[nxt] - C[P]) * np.exp(-L[P]), 0.0)  # rewards between inference i and i+1
        phi = cfg.shaping_h * ep.potential
        phi_next = np.where(last, 0.0, np.append(phi[1:], 0.0))
        adv = returns.gae(seg + phi_next - phi, V, np.append(V[1:], 0.0), disc, lam)
        return adv, adv + V

    def rollout(self, wseed: int, sched: Any) -> Episode:
        return run_episode(self.pool, wseed, sched, self.cfg, True, self.horizon_s())

    def remember(self, ep: Episode) -> None:
        if ep.actions.size:
            adv, target = self.advantages(ep)
            self.replay.add(x=ep.states, m=ep.masks, a=ep.actions, g=target.astype(np.float32),
                            adv=adv.astype(np.float32), mu=ep.mu)

    def forward(self, b: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(b["x"].astype(np.float32))
        g = torch.from_numpy(b["g"].astype(np.float32)) / self.cfg.value_scale
        return self.net.logits(x), torch.from_numpy(b["m"]), self.net.value_of(x), g

    def evaluate(self) -> float:
        return evaluate(self.pool, self.net, self.cfg, self.cfg.valid_seeds)
