"""Harmony (Bao, Peng, Wu, "Deep Learning-based Job Placement in
Distributed Machine Learning Clusters", IEEE INFOCOM 2019; and its journal
extension, Bao, Peng, Chen, Wu, "... With Heterogeneous Workloads", IEEE/ACM
ToN 2023), level 2 only, on this project's engine.

What it follows from the papers:

- Placement only: each job's workers and PSs are given (as the job requests
  them, ``allocation: fifo``, or by ``optimus``); Harmony chooses the
  server of each of its tasks, one task after another (workers, then PSs),
  each choice seeing the ones before it.
- State: the placement of the running jobs and their types (per server: the
  workers of other jobs of each type, their PSs, the jobs that span several
  servers, free GPUs, cores and memory, the job's own tasks there), and the
  job being placed (type, workers, PSs, what is left to place).
- A reward-prediction network, trained on observed (placement, speed)
  samples, gives the reward of placements never run: first on the samples
  of the jobs run by existing placement policies (``pack``, ``balance``,
  ``random``: the "historical traces"), then also on the samples of
  Harmony's own episodes, refitted as they come. Its output is a job's
  speed normalised by its speed alone on an ideal placement.
- The reward of placing a job: the predicted normalised speed of the job
  plus the predicted change of the normalised speeds of the jobs it joins on
  its servers (the speed the placement keeps against an interference-free
  one, for the job placed and its neighbours); returns are discounted over
  the following job placements (gamma 0.9), so that a placement that
  leaves no room for the next jobs to keep their tasks together pays too.
- Actor-critic (policy over servers, value of the state), experience replay
  (the newest samples, minibatches drawn uniformly), an entropy bonus, and
  job-aware exploration: with probability epsilon a task goes to the server
  that already holds most of its job's tasks (else a random valid server).

Simplified or adapted (also in docs/policies.md):

- the policy scores each server with one MLP shared by all servers (its
  row, the job's features, the free share of the cluster) instead of a
  fully connected network over a fixed number of servers, and the value
  reads the job's features with the mean and max of the server rows: the
  same state, and a network that runs on any number of servers; the
  journal's sequence-to-sequence model with attention (one output per
  task, for PS and all-reduce jobs alike) is not rebuilt: all-reduce jobs
  are placed task by task like PS jobs;
- the network picks a server; the GPU inside it is the free one on the
  PCIe switch (then socket) holding most of the job's workers, then the one
  with fewest other workers on its switch; a PS goes to the server's socket
  holding most of the job's workers;
- the reward network predicts one job's normalised speed from a fixed set
  of features of its placement and its neighbourhood (servers spanned,
  workers per server, cross-socket workers, remote PSs, other workers on
  its switches and sockets, other tasks and multi-server jobs on its
  servers, NIC bandwidth), rather than all jobs' speeds from the whole
  cluster's placement matrix;
- the episodes run in the simulator (decision points at arrivals and
  completions), whose true speeds are the "observed" samples; rewards never
  read the simulator's speeds directly, only the prediction network's;
- added: before the actor-critic, a supervised warm-up of the actor on
  ``pack``'s rule played in Harmony's own action space (``pack_server``:
  the server of most of the job's workers while it has room, else the
  fullest one that holds the workers left, else the emptiest), as DL2
  starts from DRF; the papers start the actor from scratch and let the
  reward network stand in for the cluster (a start from scratch did not
  fit this project's training budget of minutes on 2 shared cores);
- added server feature ``fits_rest`` (the server holds every worker still
  to place), which the papers' per-server free-resource inputs imply but a
  small network reads poorly from two numbers;
- the shipped checkpoint (``harmony-default.pt``) was trained on ``comm``
  (``default`` with 10 Gbit/s NICs and PCIe switches of 4 GPUs, given as
  ``--set`` overrides), the scenario where placement and interference
  matter; GAE(0.95) advantages; replayed samples weighted by truncated
  importance weights min(1, pi/mu) (ACER), mu the probability with which
  the action was taken, exploration included;
- jobs the allocation keeps unchanged stay where they run (no restart), as
  in every placement of this project; inside the engine the policy is
  greedy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
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
from hrlsched.contract import ClusterView, Decision, Scheduler
from hrlsched.core.catalogue import DL2_MODELS, ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.rivals import actor_critic as ac
from hrlsched.rivals.replay import ReplayBuffer

HOUR = 3600.0
METRICS = ["episode", "seed", "inferences", "jobs_placed", "return", "epsilon", "rollout_s", "pg", "vf", "ent",
          "pred_mse", "wall_s", "valid_avg_jct_h", "best_valid_avg_jct_h"]  # metrics.csv columns
TYPES = DL2_MODELS
_T = {m: i for i, m in enumerate(TYPES)}
SERVER_FEATURES = ("valid", "fits_rest", "free_gpus", "free_switch_gpus", "free_cores", "free_mem", "own_workers", "own_ps",
                   "other_workers", "other_ps", "other_multi", "nic_gbps", *(f"other:{m}" for m in TYPES))
TASK_FEATURES = (*(f"type:{m}" for m in TYPES), "workers", "ps", "workers_left", "ps_left", "placing_ps",
                 "params_gb", "is_ps", "sensitivity", "free_cluster")
PRED_FEATURES = (*(f"type:{m}" for m in TYPES), "workers", "ps", "is_ps", "async", "servers", "max_server_share",
                 "switches", "cross_socket", "remote_ps", "others_switch", "others_socket", "others_server",
                 "others_multi", "nic_gbps", "params_gb")


_S = {n: i for i, n in enumerate(SERVER_FEATURES)}


def features() -> dict[str, list[str]]:
    return {"server": list(SERVER_FEATURES), "task": list(TASK_FEATURES), "predict": list(PRED_FEATURES)}


@dataclass
class HarmonyConfig(ac.ActorCriticConfig):
    """Harmony's settings beyond ``ActorCriticConfig``'s, and its defaults
    there: ``gamma`` is per job placed, the warm-up's teacher is pack's rule."""

    allocation: str = "fifo"  # the workers and PSs of each job: as requested (fifo) or optimus
    # reward prediction
    history: list[str] = field(default_factory=lambda: ["pack", "balance", "random"])
    history_episodes: int = 2  # training seeds per history placement
    pred_hidden: int = 64
    pred_epochs: int = 30
    pred_lr: float = 1e-3
    pred_buffer: int = 50000
    refit_every: int = 10  # episodes between refits on the samples seen since
    refit_epochs: int = 3
    # ActorCriticConfig's, with Harmony's values
    sl_epochs: int = 12
    gamma: float = 0.9
    lr: float = 1e-4
    entropy: float = 0.003
    replay: int = 16384
    updates: int = 16

    def validate(self) -> None:
        from hrlsched.policies.registry import ALLOCATIONS, PLACEMENTS

        super().validate()
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"allocation: unknown policy {self.allocation!r}; expected one of {sorted(ALLOCATIONS)}")
        bad = [h for h in self.history if h not in PLACEMENTS]
        if bad:
            raise ValueError(f"history: unknown placements {bad}; expected among {sorted(PLACEMENTS)}")
        check_fields(self, ("pred_hidden", "pred_buffer", "refit_every"), lambda v: int(v) >= 1, "a positive integer")
        check_fields(self, ("history_episodes", "pred_epochs", "refit_epochs"), lambda v: int(v) >= 0,
                     "an integer >= 0")
        check_fields(self, ("pred_lr",), lambda v: float(v) > 0, "a positive value")


class HarmonyNet(nn.Module):
    """The server scorer (actor), the value (critic) and the reward-prediction
    network."""

    def __init__(self, cfg: HarmonyConfig) -> None:
        super().__init__()
        S, T = len(SERVER_FEATURES), len(TASK_FEATURES)
        self.S, self.T = S, T
        self.actor = mlp(S + T, cfg.hidden, cfg.hidden, 1)
        self.critic = mlp(T + 2 * S, cfg.hidden, cfg.hidden, 1)
        self.predictor = mlp(len(PRED_FEATURES), cfg.pred_hidden, cfg.pred_hidden, 1)

    def policy_params(self) -> list[nn.Parameter]:
        return list(self.actor.parameters())

    def value_params(self) -> list[nn.Parameter]:
        return list(self.critic.parameters())

    def logits(self, servers: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        """servers (B, M, S), task (B, T) -> (B, M)."""
        M = servers.shape[1]
        return self.actor(torch.cat([servers, task[:, None, :].expand(-1, M, -1)], -1)).squeeze(-1)

    def value(self, servers: torch.Tensor, task: torch.Tensor, valid_servers: torch.Tensor) -> torch.Tensor:
        real = valid_servers[..., None].float()
        mean = (servers * real).sum(1) / real.sum(1).clamp(min=1.0)
        mx = (servers * real).max(1).values
        return self.critic(torch.cat([task, mean, mx], -1)).squeeze(-1)


# ------------------------------------------------------- reward prediction
class Neighbourhood:
    """Counts of the tasks placed at one moment (per GPU, switch, socket,
    server), from which ``PRED_FEATURES`` of any placed job are read."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.gpu_w = np.zeros(topo.n_gpus)
        self.sock_t = np.zeros(topo.n_sockets)
        self.srv_t = np.zeros(topo.n_servers)
        self.srv_multi = np.zeros(topo.n_servers)
        self.srv_type_w = np.zeros((topo.n_servers, len(TYPES)))
        self.srv_ps = np.zeros(topo.n_servers)
        self.pl: dict[int, tuple[Job, Placement]] = {}

    @staticmethod
    def servers_of(topo: Topology, pl: Placement) -> np.ndarray:
        return np.unique(np.concatenate([topo.gpu_server[list(pl.gpus)],
                                         topo.socket_server[list(pl.ps_sockets)]]).astype(np.int64))

    def add(self, job: Job, pl: Placement, sign: float = 1.0) -> None:
        t = self.topo
        g = np.asarray(pl.gpus, dtype=np.int64)
        s = np.asarray(pl.ps_sockets, dtype=np.int64)
        np.add.at(self.gpu_w, g, sign)
        np.add.at(self.sock_t, t.gpu_socket[g], sign)
        np.add.at(self.sock_t, s, sign)
        np.add.at(self.srv_t, t.gpu_server[g], sign)
        np.add.at(self.srv_t, t.socket_server[s], sign)
        np.add.at(self.srv_ps, t.socket_server[s], sign)
        ti = _T.get(job.model)
        if ti is not None:
            np.add.at(self.srv_type_w[:, ti], t.gpu_server[g], sign)
        srv = self.servers_of(t, pl)
        if srv.size > 1:
            self.srv_multi[srv] += sign
        if sign > 0:
            self.pl[job.job_id] = (job, pl)
        else:
            self.pl.pop(job.job_id, None)

    def features(self, job: Job, pl: Placement, prof: ModelProfile) -> np.ndarray:
        """``PRED_FEATURES`` of ``job`` at ``pl``, among the tasks counted
        here (the job's own included)."""
        t = self.topo
        x = np.zeros(len(PRED_FEATURES), dtype=np.float32)
        ti = _T.get(job.model)
        if ti is not None:
            x[ti] = 1.0
        o = len(TYPES)
        g = np.asarray(pl.gpus, dtype=np.int64)
        s = np.asarray(pl.ps_sockets, dtype=np.int64)
        w, p = g.size, s.size
        wsrv = t.gpu_server[g]
        srv = self.servers_of(t, pl)
        x[o + 0] = w / 16.0
        x[o + 1] = p / 16.0
        x[o + 2] = job.arch == "ps"
        x[o + 3] = job.mode == "async"
        x[o + 4] = srv.size / 4.0
        x[o + 5] = np.bincount(wsrv).max() / max(w, 1) if w else 0.0
        sw = np.unique(t.gpu_switch[g])
        x[o + 6] = sw.size / max(w, 1)
        # workers off the socket that holds most of the job's workers on their server
        cross = 0
        for v in np.unique(wsrv):
            socks = t.gpu_socket[g[wsrv == v]]
            cross += socks.size - np.bincount(socks).max()
        x[o + 7] = cross / max(w, 1)
        x[o + 8] = np.isin(t.socket_server[s], wsrv).size and float(np.mean(~np.isin(t.socket_server[s], wsrv)))
        own_sw = np.bincount(t.gpu_switch[g], minlength=t.n_switches)
        sw_w = np.bincount(t.gpu_switch, weights=self.gpu_w, minlength=t.n_switches)
        x[o + 9] = float((sw_w[sw] - own_sw[sw]).sum()) / max(w, 1)
        socks = np.unique(np.concatenate([t.gpu_socket[g], s]))
        own_sock = np.bincount(t.gpu_socket[g], minlength=t.n_sockets) + np.bincount(s, minlength=t.n_sockets)
        x[o + 10] = float((self.sock_t[socks] - own_sock[socks]).sum()) / max(socks.size, 1) / 4.0
        own_srv = np.bincount(wsrv, minlength=t.n_servers) + np.bincount(t.socket_server[s], minlength=t.n_servers)
        x[o + 11] = float((self.srv_t[srv] - own_srv[srv]).sum()) / max(srv.size, 1) / 8.0
        x[o + 12] = float((self.srv_multi[srv] - (srv.size > 1)).sum()) / max(srv.size, 1) / 4.0
        x[o + 13] = float(t.nic_gbps[srv].mean()) / 25.0 if srv.size else 0.0
        x[o + 14] = prof.params_mb / 1000.0
        return x


class Predictor:
    """The reward-prediction network in numpy (inside episodes)."""

    def __init__(self, net: HarmonyNet) -> None:
        self.f = NumpyMLP(net.predictor)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip(self.f(x)[..., 0], 0.0, 1.5)


def fit_predictor(net: HarmonyNet, X: np.ndarray, y: np.ndarray, epochs: int, lr: float, rng: np.random.Generator,
                  opt: torch.optim.Optimizer | None = None, minibatch: int = 256) -> list[float]:
    """Mean squared error regression of the normalised speed; returns the
    training loss per epoch."""
    opt = opt or torch.optim.Adam(net.predictor.parameters(), lr=lr)
    Xt, yt = torch.from_numpy(X.astype(np.float32)), torch.from_numpy(y.astype(np.float32))
    out = []
    for _ in range(epochs):
        order = torch.from_numpy(rng.permutation(len(y)))
        tot = 0.0
        for s in range(0, len(y), minibatch):
            idx = order[s:s + minibatch]
            loss = (net.predictor(Xt[idx]).squeeze(-1) - yt[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(idx)
        out.append(tot / max(len(y), 1))
    return out


def predictor_mse(net: HarmonyNet, X: np.ndarray, y: np.ndarray) -> float:
    with torch.no_grad():
        p = net.predictor(torch.from_numpy(X.astype(np.float32))).squeeze(-1).numpy()
    return float(np.mean((p - y) ** 2))


def observed_samples(view: ClusterView, profiles: dict[str, ModelProfile], iso: dict[tuple, float]
                     ) -> tuple[list[np.ndarray], list[float]]:
    """(features, normalised speed) of every running job of ``view``: its
    measured speed over its speed alone at its (workers, PSs)."""
    nb = Neighbourhood(view.topology)
    running = [(k, j, pl) for k, (j, pl) in enumerate(zip(view.jobs, view.placements)) if pl is not None]
    for _, j, pl in running:
        nb.add(j, pl)
    xs, ys = [], []
    for k, j, pl in running:
        sp = float(view.speed[k])
        if sp <= 0:
            continue
        key = (j.job_id, j.arch, j.mode, pl.n_workers, pl.n_ps, int(view.batch_sizes[k]))
        base = iso.get(key)
        if base is None:
            base = iso[key] = float(view.perf.isolated_speed(j, pl.n_workers, pl.n_ps, int(view.batch_sizes[k])))
        prof = profiles.get(j.model) or profiles.setdefault(j.model, get_profile(j.model, view.catalogue))
        xs.append(nb.features(j, pl, prof))
        ys.append(sp / max(base, 1e-12))
    return xs, ys


# ---------------------------------------------------------------- scheduler
CHECKPOINTS = ac.CheckpointKind("harmony", features(), HarmonyConfig, HarmonyNet,
                                "rivals/checkpoints/harmony-default.pt")


class HarmonyScheduler(ac.ActorCriticScheduler):
    """Harmony inside the engine: the allocation policy gives each job's
    workers and PSs; the actor picks the server of each task (greedy, or
    sampled in training) on a ``DecisionPoint``. ``act``: "greedy",
    "sample", "pack" (the teacher) or "random"."""

    name = "harmony"
    checkpoints = CHECKPOINTS

    def __init__(self, checkpoint: str | Path | None = None, *, net: HarmonyNet | None = None,
                 cfg: HarmonyConfig | None = None, act: str = "greedy", allocation: str | None = None) -> None:
        super().__init__(checkpoint, net=net, cfg=cfg, act=act)
        self.allocation = allocation or self.cfg.allocation
        self.collect = False  # keep observed (placement, speed) samples
        self.dp = None
        if self.allocation == "optimus":  # optimus re-allocates every 10 minutes too
            self.decision_points = "round"

    def set_net(self, net: HarmonyNet) -> None:
        self.actor = NumpyMLP(net.actor)
        self.predict = Predictor(net)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        from hrlsched.envs.base import heuristics
        from hrlsched.envs.decision import DecisionPoint

        self.topo = topology
        made = heuristics(agent_allocates=False, allocation=self.allocation, placement="pack")
        self.dp = DecisionPoint(topology, agent_allocates=False, agent_places=True, **made._asdict(),
                                max_jobs=max(256, topology.n_gpus), rescue_idle=True)
        self.dp.reset(rng)
        self.profiles: dict[str, ModelProfile] = {}
        self.iso: dict[tuple, float] = {}
        self.inferences = 0
        self.servers: list[np.ndarray] = []
        self.tasks: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.actions: list[int] = []
        self.mus: list[float] = []  # behaviour probability of each recorded action
        self.job_of: list[int] = []  # index of the job placement each inference belongs to
        self.rewards: list[float] = []  # one per job placed by the actor
        self.sample_x: list[np.ndarray] = []
        self.sample_y: list[float] = []
        t = topology
        self._srv_gpus = np.maximum(t.server_gpus, 1).astype(float)
        self._sw_size = np.bincount(t.gpu_switch, minlength=t.n_switches)

    # -- features
    def _profile(self, job: Job) -> ModelProfile:
        p = self.profiles.get(job.model)
        if p is None:
            p = self.profiles[job.model] = get_profile(job.model, self.dp.view.catalogue)  # type: ignore[union-attr]
        return p

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Server rows, task row and the valid servers of the current task."""
        dp, t = self.dp, self.topo
        assert dp is not None
        part = dp.part
        job = part.job
        prof = self._profile(job)
        M = t.n_servers
        worker = part.placing_worker
        valid_units = part.gpu_mask() if worker else part.socket_mask()
        unit_server = t.gpu_server if worker else t.socket_server
        valid = np.bincount(unit_server, weights=valid_units, minlength=M) > 0
        S = np.zeros((M, len(SERVER_FEATURES)), dtype=np.float32)
        S[:, 0] = valid
        # the server holds every worker still to place (the job stays on few servers)
        S[:, 1] = valid & (np.bincount(unit_server, weights=valid_units, minlength=M)
                           >= (part.n_workers - len(part.gpus) if worker else 1))
        free = (part.gpu_left > 0).astype(float)
        S[:, 2] = np.bincount(t.gpu_server, weights=free, minlength=M) / self._srv_gpus
        sw_free = np.bincount(t.gpu_switch, weights=free, minlength=t.n_switches)
        best = np.zeros(M)
        np.maximum.at(best, t.switch_server, sw_free / np.maximum(self._sw_size, 1))
        S[:, 3] = best
        S[:, 4] = part.cores_left / np.maximum(t.server_cores, 1e-9)
        S[:, 5] = part.mem_left / np.maximum(t.server_mem_gb, 1e-9)
        g = np.asarray(part.gpus, dtype=np.int64)
        S[:, 6] = np.bincount(t.gpu_server[g], minlength=M) / max(part.n_workers, 1)
        S[:, 7] = np.bincount(t.socket_server[np.asarray(part.sockets, dtype=np.int64)], minlength=M) / max(part.n_ps, 1)
        nb = self.nb
        S[:, 8] = (nb.srv_t - nb.srv_ps) / self._srv_gpus
        S[:, 9] = nb.srv_ps / 8.0
        S[:, 10] = nb.srv_multi / 4.0
        S[:, 11] = t.nic_gbps / 25.0
        S[:, 12:] = nb.srv_type_w / self._srv_gpus[:, None]
        T = np.zeros(len(TASK_FEATURES), dtype=np.float32)
        ti = _T.get(job.model)
        if ti is not None:
            T[ti] = 1.0
        o = len(TYPES)
        T[o + 0] = part.n_workers / 16.0
        T[o + 1] = part.n_ps / 16.0
        T[o + 2] = (part.n_workers - len(part.gpus)) / 16.0
        T[o + 3] = (part.n_ps - len(part.sockets)) / 16.0
        T[o + 4] = not worker
        T[o + 5] = prof.params_mb / 1000.0
        T[o + 6] = job.arch == "ps"
        T[o + 7] = prof.compute_sensitivity * 10.0
        T[o + 8] = float(free.mean())
        return S, T, valid

    def _unit(self, server: int) -> int:
        """The GPU (worker) or socket (PS) of the chosen server: locality to
        the job's own workers first, then the fewest other workers."""
        dp, t = self.dp, self.topo
        part = dp.part
        g_own = np.asarray(part.gpus, dtype=np.int64)
        if part.placing_worker:
            gpus = np.flatnonzero((t.gpu_server == server) & part.gpu_mask())
            own_sw = np.bincount(t.gpu_switch[g_own], minlength=t.n_switches)
            own_so = np.bincount(t.gpu_socket[g_own], minlength=t.n_sockets)
            others = np.bincount(t.gpu_switch, weights=dp.board.gpu_workers, minlength=t.n_switches)
            key = np.lexsort((gpus, others[t.gpu_switch[gpus]], -own_so[t.gpu_socket[gpus]],
                              -own_sw[t.gpu_switch[gpus]]))
            return dp.place_off + int(gpus[key[0]])
        socks = np.flatnonzero((t.socket_server == server) & part.socket_mask())
        own_so = np.bincount(t.gpu_socket[g_own], minlength=t.n_sockets)
        key = np.lexsort((socks, dp.board.socket_ps[socks], -own_so[socks]))
        return dp.place_off + dp.max_gpus + int(socks[key[0]])

    def _explore(self, S: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Job-aware exploration's distribution over servers: the server
        holding most of the job's tasks, else uniform over the valid ones."""
        own = S[:, _S["own_workers"]] + S[:, _S["own_ps"]]
        cand = np.flatnonzero(valid & (own > 0))
        q = np.zeros(valid.size)
        if cand.size:
            q[cand[np.argmax(own[cand])]] = 1.0
        else:
            q[valid] = 1.0 / valid.sum()
        return q

    def pack_server(self, valid: np.ndarray) -> int:
        """The supervised warm-up's teacher, ``pack``'s rule in Harmony's
        action space: the server holding most of the job's workers while it
        has room, else the fullest server that fits the workers left (best
        fit), else the emptiest; a PS to the server of most of its workers."""
        part, t = self.dp.part, self.topo  # type: ignore[union-attr]
        own = part.workers_on_server
        if part.placing_worker:
            free = np.bincount(t.gpu_server, weights=part.gpu_mask(), minlength=t.n_servers)
            free = np.where(valid, free, 0.0)
            if (own[valid] > 0).any():
                return int(np.argmax(np.where(valid, own, -1)))
            left = part.n_workers - len(part.gpus)
            fits = np.flatnonzero(free >= left)
            if fits.size:
                return int(fits[np.argmin(free[fits])])
            return int(np.argmax(free))
        return int(np.argmax(np.where(valid, own, -1)))

    def choose(self, S: np.ndarray, T: np.ndarray, valid: np.ndarray) -> int:
        if self.act == "random":  # uniform over the valid servers (a baseline)
            return int(self.rng.choice(np.flatnonzero(valid)))
        if self.act == "pack":
            return self.pack_server(valid)
        logits = self.actor(np.concatenate([S, np.broadcast_to(T, (S.shape[0], T.size))], 1))[:, 0]
        if self.act == "greedy":
            return int(np.argmax(masked_logits(logits, valid)))
        p = masked_softmax(logits, valid)
        q = self._explore(S, valid)
        if self.epsilon > 0 and self.rng.random() < self.epsilon:
            a = int(self.rng.choice(q.size, p=q))
        else:
            a = int(self.rng.choice(p.size, p=p))
        self.mu = (1 - self.epsilon) * float(p[a]) + self.epsilon * float(q[a])  # behaviour probability
        return a

    # -- the reward of a job's placement, from the prediction network
    def placement_reward(self, job: Job, pl: Placement) -> float:
        nb, t = self.nb, self.topo
        srv = Neighbourhood.servers_of(t, pl)
        neigh = [(j, p) for jid, (j, p) in nb.pl.items()
                 if np.intersect1d(Neighbourhood.servers_of(t, p), srv).size]
        before = [nb.features(j, p, self._profile(j)) for j, p in neigh]
        nb.add(job, pl)
        after = [nb.features(j, p, self._profile(j)) for j, p in neigh]
        x = np.stack([nb.features(job, pl, self._profile(job)), *after, *before])
        y = self.predict(x)
        k = len(neigh)
        return float(y[0] + (y[1:1 + k] - y[1 + k:]).sum())

    def decide(self, view: ClusterView) -> Decision:
        dp = self.dp
        assert dp is not None, "HarmonyScheduler: reset() first"
        if self.collect:
            xs, ys = observed_samples(view, self.profiles, self.iso)
            self.sample_x += xs
            self.sample_y += ys
        more = dp.begin(view)
        self.nb = Neighbourhood(self.topo)
        for jid, pl in dp.placements.items():
            self.nb.add(view.jobs[view.index(jid)], pl)
        open_job = False  # the current job has recorded inferences and no reward yet
        while more:
            S, T, valid = self._rows()
            if not valid.any():  # a dead end: the job waits
                more = dp.act(dp.defer_action)
                if open_job:
                    self.rewards.append(0.0)
                    open_job = False
                continue
            self.mu = 1.0
            a = self.choose(S, T, valid)
            if self.recording:
                self.mus.append(self.mu)
                self.servers.append(S.astype(np.float16))
                self.tasks.append(T)
                self.masks.append(valid)
                self.actions.append(a)
                self.job_of.append(len(self.rewards))
                open_job = True
            part = dp.part
            n_before = len(dp.placements)
            more = dp.act(self._unit(a))
            self.inferences += 1
            if len(dp.placements) > n_before:  # the job's last task: placed
                jid, pl = next(reversed(dp.placements.items()))
                if self.recording:
                    self.rewards.append(self.placement_reward(part.job, pl))
                    open_job = False
                else:
                    self.nb.add(part.job, pl)
        return dp.decision()


# ------------------------------------------------------------------ training
@dataclass
class Episode:
    servers: list[np.ndarray]
    tasks: np.ndarray
    masks: list[np.ndarray]
    actions: np.ndarray
    mu: np.ndarray  # behaviour probability of each action
    job_of: np.ndarray
    rewards: np.ndarray
    sample_x: list[np.ndarray]
    sample_y: list[float]
    avg_jct_s: float
    inferences: int


def run_episode(pool: Any, wseed: int, sched: Scheduler, horizon_s: float | None, record: bool = False,
                collect: bool = False, episode_seed: int = 0) -> Episode:
    """One episode of ``sched`` (Harmony, or a heuristic whose observed
    samples are collected: the history) on the workload of ``wseed``."""
    max_tasks = getattr(sched, "max_tasks_per_gpu", 1)
    points, _ = sched.points()
    sim = pool.simulation(wseed, max_tasks, points)
    view = sim.reset(episode_seed)
    sched.reset(sim.topo, np.random.default_rng(episode_seed))
    xs: list[np.ndarray] = []
    ys: list[float] = []
    prof: dict[str, ModelProfile] = {}
    iso: dict[tuple, float] = {}
    if isinstance(sched, HarmonyScheduler):
        sched.recording, sched.collect = record, collect
    job_s = 0.0
    while view is not None:
        if collect and not isinstance(sched, HarmonyScheduler):
            x, y = observed_samples(view, prof, iso)
            xs += x
            ys += y
        out = sim.step(sched.decide(view))
        job_s += out.job_seconds
        view = out.view
        if horizon_s is not None and sim.state.time_s >= horizon_s:
            break
    arrived = len(sim.jobs) if view is None else int(sim.state.next_arrival)
    if isinstance(sched, HarmonyScheduler):
        return Episode(sched.servers, np.asarray(sched.tasks, dtype=np.float32).reshape(-1, len(TASK_FEATURES)),
                       sched.masks, np.asarray(sched.actions, dtype=np.int64), np.asarray(sched.mus, dtype=np.float32),
                       np.asarray(sched.job_of, dtype=np.int64),
                       np.asarray(sched.rewards), sched.sample_x, sched.sample_y, job_s / max(arrived, 1),
                       sched.inferences)
    return Episode([], np.zeros((0, len(TASK_FEATURES)), np.float32), [], np.zeros(0, np.int64),
                   np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0), xs, ys, job_s / max(arrived, 1), 0)


def evaluate(pool: Any, net: HarmonyNet, cfg: HarmonyConfig, seeds: list[int]) -> float:
    """Greedy mean avg JCT on ``seeds``, each run with the engine seeded by
    its workload seed, as ``hrlsched simulate --seed`` and
    ``hrlsched evaluate --rivals`` run it (the same figures; under ``optimus``
    the engine's random stream moves a seed's figure)."""
    sched = HarmonyScheduler(net=net, cfg=cfg, act="greedy")
    return float(np.mean([run_episode(pool, s, sched, None, episode_seed=s).avg_jct_s for s in seeds]))


def _pad(servers: list[np.ndarray], masks: list[np.ndarray], M: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(servers)
    S = np.zeros((n, M, len(SERVER_FEATURES)), dtype=np.float16)
    V = np.zeros((n, M), dtype=bool)
    for i, (s, m) in enumerate(zip(servers, masks)):
        S[i, : s.shape[0]] = s
        V[i, : m.size] = m
    return S, V


class Trainer(ac.ActorCriticTrainer):
    """Harmony's training: the reward-prediction network on the history of
    existing placements (``history``), the warm-up on pack's rule
    (``supervised``), then actor-critic with experience replay
    (``rivals.actor_critic``), the prediction network refitted on the
    samples of its episodes."""

    checkpoints = CHECKPOINTS
    scheduler = HarmonyScheduler
    metrics = METRICS
    progress_field = ("jobs placed", "jobs_placed")
    warm_up_after_init = True

    def setup(self) -> None:
        cfg = self.cfg
        self.opt_pred = torch.optim.Adam(self.net.predictor.parameters(), lr=cfg.pred_lr)
        self.M = self.pool.built(cfg.train_seeds[0]).topology.n_servers
        self.samples = ReplayBuffer(cfg.pred_buffer)
        self.fresh = 0  # samples added since the last refit
        self.history_done = False

    # -- checkpoints
    def payload(self) -> dict[str, Any]:
        return {**super().payload(), "history_done": self.history_done, "opt_pred": self.opt_pred.state_dict(),
                "samples": {k: v[: self.samples.size] for k, v in self.samples.data.items()}}

    def restore(self, ck: dict[str, Any]) -> None:
        super().restore(ck)
        self.opt_pred.load_state_dict(ck["opt_pred"])
        self.history_done = bool(ck["history_done"])
        if ck.get("samples"):
            self.samples.add(**ck["samples"])

    def warm_up(self) -> None:
        if not self.history_done:
            self.history()
            self.save()
        if not self.sl_done:
            if self.cfg.sl_episodes > 0:
                self.supervised()
            self.sl_done = True
            self.save()

    # -- the reward-prediction network on the history
    def history(self) -> None:
        from hrlsched.policies.registry import make_scheduler

        cfg = self.cfg
        t0 = time.time()
        seeds = [int(s) for s in self.rng.choice(cfg.train_seeds, size=min(cfg.history_episodes, len(cfg.train_seeds)),
                                                 replace=False)]
        xs: list[np.ndarray] = []
        ys: list[float] = []
        for place in cfg.history:
            for s in seeds:
                ep = run_episode(self.pool, s, make_scheduler(f"{cfg.allocation}+{place}"), self.horizon_s(),
                                 collect=True)
                xs += ep.sample_x
                ys += ep.sample_y
        hx, hy = [], []
        for place in cfg.history:  # held out: a validation seed
            ep = run_episode(self.pool, cfg.valid_seeds[0], make_scheduler(f"{cfg.allocation}+{place}"),
                             self.horizon_s(), collect=True)
            hx += ep.sample_x
            hy += ep.sample_y
        X, y = np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.float32)
        HX, Hy = np.asarray(hx, dtype=np.float32), np.asarray(hy, dtype=np.float32)
        before = predictor_mse(self.net, HX, Hy)
        fit_predictor(self.net, X, y, cfg.pred_epochs, cfg.pred_lr, self.rng, self.opt_pred)
        after = predictor_mse(self.net, HX, Hy)
        self.samples.add(x=X, y=y)
        self.log(f"reward prediction: {y.size} observed samples of {', '.join(cfg.history)} on seeds {seeds} "
                 f"({time.time() - t0:.0f} s); held-out MSE {before:.4f} -> {after:.4f} on {Hy.size} samples "
                 f"of seed {cfg.valid_seeds[0]} (variance {float(Hy.var()):.4f})")
        self.history_done = True

    # -- supervised warm-up on pack's rule
    def supervised(self) -> None:
        """Cross-entropy of the actor on the servers ``pack_server`` picks (a
        start from a sound placement, as DL2 starts from DRF; not in
        Harmony's papers), and the critic on those episodes' returns."""
        cfg = self.cfg
        t0 = time.time()
        seeds = [int(s) for s in self.rng.choice(cfg.train_seeds, size=min(cfg.sl_episodes, len(cfg.train_seeds)),
                                                 replace=False)]
        teacher = HarmonyScheduler(net=self.net, cfg=cfg, act="pack")
        eps = [run_episode(self.pool, s, teacher, self.horizon_s(), record=True) for s in seeds]
        valid = run_episode(self.pool, cfg.valid_seeds[0], teacher, self.horizon_s(), record=True)
        padded = [_pad(e.servers, e.masks, self.M) for e in eps]
        S = np.concatenate([p[0] for p in padded]).astype(np.float32)
        Vm = np.concatenate([p[1] for p in padded])
        T = np.concatenate([e.tasks for e in eps])
        A = np.concatenate([e.actions for e in eps])
        vs, vm = (torch.from_numpy(x) for x in _pad(valid.servers, valid.masks, self.M))
        vs, vt, va = vs.float(), torch.from_numpy(valid.tasks), torch.from_numpy(valid.actions)
        opt = torch.optim.Adam(self.net.policy_params(), lr=cfg.sl_lr)

        def cross_entropy(idx: np.ndarray) -> torch.Tensor:
            d = MaskedCategorical(self.net.logits(torch.from_numpy(S[idx]), torch.from_numpy(T[idx])),
                                  torch.from_numpy(Vm[idx]))
            return -d.log_prob(torch.from_numpy(A[idx])).mean()

        acc = math.nan
        for _ in range(cfg.sl_epochs):
            self.descend(opt, A.size, cfg.sl_minibatch, cross_entropy)
            if va.numel():
                with torch.no_grad():
                    acc = float((MaskedCategorical(self.net.logits(vs, vt), vm).greedy() == va).float().mean())
        # the critic on the teacher's returns, so that the first advantages are not against noise
        G = np.concatenate([self.advantages(e, torch.from_numpy(p[0].astype(np.float32)), torch.from_numpy(e.tasks),
                                            torch.from_numpy(p[1]), lam=1.0)[1]
                            for e, p in zip(eps, padded)]).astype(np.float32)

        def value_error(idx: np.ndarray) -> torch.Tensor:
            v = self.net.value(torch.from_numpy(S[idx]), torch.from_numpy(T[idx]), torch.from_numpy(Vm[idx]))
            return (v - torch.from_numpy(G[idx])).pow(2).mean()

        for _ in range(max(cfg.sl_epochs // 2, 1)):
            self.descend(self.opt_v, A.size, cfg.sl_minibatch, value_error)
        self.log(f"pack warm-up: {A.size} teacher inferences on seeds {seeds}, {cfg.sl_epochs} epochs "
                 f"({time.time() - t0:.0f} s); accuracy on seed {cfg.valid_seeds[0]}: {acc:.3f}")
        self.save("sl.pt")

    # -- actor-critic with experience replay
    def advantages(self, ep: Episode, S: torch.Tensor, T: torch.Tensor, V: torch.Tensor,
                   lam: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """GAE over inferences: a job's reward comes after its last task, and
        the discount is gamma per job placed."""
        cfg = self.cfg
        lam = cfg.gae_lambda if lam is None else lam
        with torch.no_grad():
            v = self.net.value(S, T, V).numpy().astype(np.float64)
        J = ep.rewards.size
        Gj = np.append(returns.returns_to_go(ep.rewards, cfg.gamma), 0.0)
        P = ep.job_of
        nxt = np.append(P[1:], J)
        disc = cfg.gamma ** (nxt - P)
        adv = returns.gae(Gj[P] - disc * Gj[nxt], v, np.append(v[1:], 0.0), disc, lam)
        return adv, adv + v

    def rollout(self, wseed: int, sched: Any) -> Episode:
        return run_episode(self.pool, wseed, sched, self.horizon_s(), record=True, collect=True)

    def remember(self, ep: Episode) -> None:
        if ep.sample_y:
            self.samples.add(x=np.asarray(ep.sample_x, dtype=np.float32), y=np.asarray(ep.sample_y, dtype=np.float32))
            self.fresh += len(ep.sample_y)
        if ep.actions.size:
            S, Vm = _pad(ep.servers, ep.masks, self.M)
            St, Tt, Vt = torch.from_numpy(S.astype(np.float32)), torch.from_numpy(ep.tasks), torch.from_numpy(Vm)
            adv, target = self.advantages(ep, St, Tt, Vt)
            self.replay.add(s=S, t=ep.tasks, m=Vm, a=ep.actions, mu=ep.mu, adv=adv.astype(np.float32),
                            g=target.astype(np.float32))

    def forward(self, b: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        S = torch.from_numpy(b["s"].astype(np.float32))
        T = torch.from_numpy(b["t"])
        Vm = torch.from_numpy(b["m"])
        return self.net.logits(S, T), Vm, self.net.value(S, T, Vm), torch.from_numpy(b["g"].astype(np.float32))

    def after_update(self, ep: Episode) -> dict[str, Any]:
        """Every ``refit_every`` episodes, the prediction network refitted on
        samples of the buffer."""
        cfg = self.cfg
        pred = math.nan
        if self.episodes % cfg.refit_every == 0 and self.samples.size:
            b = self.samples.sample(min(self.samples.size, 20000), self.rng)
            fit_predictor(self.net, b["x"], b["y"], cfg.refit_epochs, cfg.pred_lr, self.rng, self.opt_pred)
            pred = predictor_mse(self.net, b["x"], b["y"])
        return {"jobs_placed": int(ep.rewards.size), "pred_mse": pred}

    def evaluate(self) -> float:
        return evaluate(self.pool, self.net, self.cfg, self.cfg.valid_seeds)
