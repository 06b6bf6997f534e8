"""Rollouts: whole (or time-truncated) episodes of several environments
on a pool of processes: a static level-1 network acts with the numpy
scorer, each decision point encoded once (``run``); another network steps
them in lockstep, one batched forward pass per step.

A job of the pool is ``RolloutSpec``: one workload seed, several episode
seeds (the *same arrival sequence* run several times, so that advantages
can be measured against the mean return of the other rollouts at the same
simulated time, Decima's input-dependent baseline), the network's weights,
and how to act (sample, greedy, or follow a heuristic teacher for behaviour
cloning). A static network's trajectories keep the encoder's inputs once
per decision point and each step's own rows, as float32; the others'
observations are stored as float16 (features are of order one) and masks
as bool, to keep long episodes in memory.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hrlsched.agent.checkpoint import env_args
from hrlsched.agent.common.mlp import NumpyMLP
from hrlsched.agent.policy import CandidateScorer
from hrlsched.envs.features import DYN_COLUMNS

ENV_IDS = {"allocate": "hrlsched/Allocation-v0", "place": "hrlsched/Placement-v0", "all": "hrlsched/Hierarchical-v0",
           "flat": "hrlsched/Flat-v0"}
INT_KEYS = ("gpu_groups",)
_DYN = list(DYN_COLUMNS)
BOOL_KEYS = ("job_mask", "gpu_mask", "socket_mask", "link_mask", "current_job", "action_mask")


def net_part(part: str) -> str:
    """The network layout (``HRLNet``'s ``part``) that scores the action
    layout of ``part``: Flat-v0's is Placement-v0's (GPUs, sockets, and
    defer as *stop*)."""
    return "place" if part == "flat" else part


@dataclass
class RolloutSpec:
    part: str  # "allocate" (Allocation-v0), "place" (Placement-v0), "all" (Hierarchical-v0), "flat" (Flat-v0)
    env_kwargs: dict[str, Any]
    workload_seed: int
    episode_seeds: Sequence[int]
    net_config: dict[str, Any] | None = None
    state_dict: dict[str, Any] | None = None
    act: str = "sample"  # "sample", "greedy" or "teacher"
    teacher: str = "optimus"
    record: bool = True  # keep observations (False: only the returns and JCT, for evaluation)
    label: bool = False  # also record the teacher's action at each step (behaviour cloning, diagnostics)
    torch_seed: int = 0  # of the sampling
    values: bool = True  # each step's value (GAE reads them; Decima's baseline does not)


@dataclass
class Trajectory:
    obs: dict[str, np.ndarray] = field(default_factory=dict)  # stacked over steps
    actions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    logp: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    rewards: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))  # simulated time at each step
    teacher: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # teacher's action
    workload_seed: int = 0
    episode_seed: int = 0
    terminated: bool = False
    # each step's decision point (0, 1, ... in the episode); with ``point_obs``, its row there
    points: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    # what a static network encodes, once per decision point (``nets.ENCODER_KEYS``; ``obs`` then
    # holds only each step's own rows); empty: ``obs`` holds whole observations
    point_obs: dict[str, np.ndarray] = field(default_factory=dict)
    # a truncated episode's value of the state it was cut at (V(s_T), what GAE bootstraps from)
    last_value: float = 0.0
    job_seconds: float = 0.0
    jobs: int = 0
    decision_points: int = 0

    @property
    def steps(self) -> int:
        return int(self.actions.size)

    @property
    def avg_jct_s(self) -> float:
        """Job-seconds in the system over the jobs: the average JCT when the
        episode ran every job to completion."""
        return self.job_seconds / max(self.jobs, 1)


def make_env(part: str, workload_seed: int, env_kwargs: dict[str, Any]) -> Any:
    import gymnasium as gym

    import hrlsched.envs  # noqa: F401  (registers the environments)

    return gym.make(ENV_IDS[part], seeds=[workload_seed], **env_args(env_kwargs)).unwrapped


_ENVS: dict[tuple, list[Any]] = {}


def cached_envs(part: str, workload_seed: int, env_kwargs: dict[str, Any], n: int) -> list[Any]:
    """``n`` environments of one workload, kept for the life of the process:
    building the scenario and warming the performance model's caches is
    paid once, not at every iteration (``reset`` starts a fresh episode)."""
    key = (part, int(workload_seed), repr(sorted(env_kwargs.items())))
    envs = _ENVS.setdefault(key, [])
    while len(envs) < n:
        envs.append(make_env(part, workload_seed, env_kwargs))
    if len(_ENVS) > 64:  # bound memory over many workloads
        for k in list(_ENVS)[: len(_ENVS) - 64]:
            if k != key:
                del _ENVS[k]
    return envs[:n]


def to_tensors(obs: dict[str, np.ndarray], batch: bool = True) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in obs.items():
        t = torch.as_tensor(v)
        if t.dtype == torch.float16:
            t = t.float()
        out[k] = t.unsqueeze(0) if batch else t
    return out


def _store(o: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for k, v in o.items():
        if k in BOOL_KEYS:
            out[k] = v.astype(bool)
        elif k in INT_KEYS:
            out[k] = v.astype(np.int16)
        else:
            out[k] = np.clip(v, -6e4, 6e4).astype(np.float16)
    return out


def _value(net: Any, o: dict[str, np.ndarray], part: str, stored: bool) -> float:
    """The value head on one observation, as stored (``stored``: as float16)."""
    with torch.inference_mode():
        _, value = net(to_tensors(_store(o) if stored else o), part=net_part(part))
    return float(value.reshape(-1)[0])


class StepScorer(CandidateScorer):
    """What a rollout of a static level-1 network acts with: the ``hrl``
    policy's numpy scorer (``agent.policy.CandidateScorer``: the point's
    encoding once, then each job's valid slots, without torch's per-call
    overhead on a handful of rows), on the rows of the step's observation,
    plus the value head in numpy."""

    def __init__(self, net: Any) -> None:
        super().__init__(net)
        self._g2, self._b2 = self.glob[1]
        self._value = NumpyMLP(net.value)
        self._hj: np.ndarray | None = None

    @staticmethod
    def encode(net: Any, scorers: list[StepScorer], points: list[dict[str, np.ndarray]]) -> None:
        """New decision points, one per scorer: ``HRLNet.encode`` of their
        observations (the inputs it reads, ``ENCODER_KEYS``) in one batch,
        without the job rows that are padding in all of them (the same up to
        float rounding), through each scorer's ``point``."""
        n = max(max(int(p["job_mask"].sum()) for p in points), 1)
        batch = {k: np.stack([p[k] for p in points]) for k in points[0]}
        batch["jobs"], batch["job_mask"] = batch["jobs"][:, :n], batch["job_mask"][:, :n]
        with torch.inference_mode():
            enc = net.encode(to_tensors(batch, batch=False))
        for sc, hj, pooled in zip(scorers, enc["hj"].numpy(), enc["pooled"].numpy()):
            sc._hj = hj
            sc.point(hj, pooled)

    def choose(self, o: dict[str, np.ndarray], greedy: bool, rng: np.random.Generator,
               value: bool) -> tuple[int, float, float]:
        """The action for observation ``o`` (``encode`` its point first):
        sampled (or the first most probable), its log-probability and, with
        ``value``, the value head's value (else 0)."""
        ix = np.flatnonzero(o["action_mask"])
        k = int(o["current_job"].argmax())
        base = o["candidates"][ix]  # (a copy) the valid slots' rows, split as ``allocation_rows`` does
        dyn = base[:, _DYN]
        base[:, _DYN] = 0.0
        c, logp = _sample(self.score(k, o["cluster"], o["context"], base, dyn, ix), greedy, rng)
        return int(ix[c]), logp, self.value(k, o["cluster"], o["context"]) if value else 0.0

    def value(self, k: int, cluster: np.ndarray, context: np.ndarray) -> float:
        """``HRLNet.heads``' value for job ``k``'s choice (``encode`` first)."""
        assert self._pj is not None and self._hj is not None, "StepScorer: encode() first"
        z = np.concatenate((cluster, context)).dot(self._g_cc)
        z += self._pj[k]
        np.maximum(z, 0.0, out=z)
        g = z.dot(self._g2) + self._b2
        return float(self._value(np.concatenate((g, self._hj[k])))[0])


def _sample(logits: np.ndarray, greedy: bool, rng: np.random.Generator) -> tuple[int, float]:
    """An index into ``logits`` (greedy: the first largest) and its
    log-probability under their softmax (float64, then as torch's float32
    ``log_softmax`` to rounding)."""
    z = logits.astype(np.float64)
    z -= z.max()
    c = np.cumsum(np.exp(z))
    total = float(c[-1])
    j = int(logits.argmax()) if greedy else min(int(c.searchsorted(rng.random() * total, "right")), len(c) - 1)
    return j, float(z[j]) - math.log(total)


class Episode:
    """One environment's episode as a rollout records it."""

    def __init__(self, env: Any, seed: int, spec: RolloutSpec, teacher: Any,
                 last_value: Callable[[dict[str, np.ndarray]], float] | None) -> None:
        self.env, self.teacher, self.record, self.last_value = env, teacher, spec.record, last_value
        self.obs, _ = env.reset(seed=int(seed))
        teacher.reset(env)
        self.traj = Trajectory(workload_seed=spec.workload_seed, episode_seed=int(seed))
        self.live = True
        self.steps: list[dict[str, np.ndarray]] = []
        self.point_obs: list[dict[str, np.ndarray]] = []
        self.cols: dict[str, list] = {k: [] for k in ("point", "a", "logp", "v", "r", "t", "teacher")}

    def step(self, a: int, logp: float, value: float, stored: dict[str, np.ndarray] | None, label: int) -> None:
        """Record the step (the observation as ``stored``) and take action ``a``."""
        env, c = self.env, self.cols
        if self.record:
            self.steps.append(stored if stored is not None else _store(self.obs))
            c["teacher"].append(label)
        c["point"].append(env.dp.decisions)
        c["a"].append(int(a))
        c["logp"].append(float(logp))
        c["v"].append(float(value))
        c["t"].append(float(env._view.time_s) if env._view is not None else 0.0)
        self.obs, r, te, tr, info = env.step(int(a))
        c["r"].append(float(r))
        if te or tr:
            self.live = False
            tj = self.traj
            tj.terminated = bool(te)
            if tr and not te and self.last_value is not None:
                tj.last_value = self.last_value(self.obs)
            tj.job_seconds = float(info["job_seconds"])
            # jobs that arrived (all of them when the workload is done)
            tj.jobs = len(env._sim.jobs) if te else int(env._sim.state.next_arrival)
            tj.decision_points = int(info["decision_points"])

    def trajectory(self) -> Trajectory:
        tj, c = self.traj, self.cols
        tj.actions = np.asarray(c["a"], dtype=np.int64)
        tj.logp = np.asarray(c["logp"], dtype=np.float32)
        tj.values = np.asarray(c["v"], dtype=np.float32)
        tj.rewards = np.asarray(c["r"], dtype=np.float32)
        tj.times = np.asarray(c["t"])
        tj.teacher = np.asarray(c["teacher"], dtype=np.int64)
        pts = np.asarray(c["point"], dtype=np.int64)  # numbered from 0 in the episode (``point_obs``' rows)
        tj.points = (np.cumsum(np.diff(pts, prepend=pts[:1]) != 0) if pts.size else pts).astype(np.int32)
        if self.steps:
            tj.obs = {k: np.stack([o[k] for o in self.steps]) for k in self.steps[0]}
            if self.point_obs:
                tj.point_obs = {k: np.stack([o[k] for o in self.point_obs]) for k in self.point_obs[0]}
        return tj


def run(spec: RolloutSpec) -> list[Trajectory]:
    """Run ``spec``'s episodes; returns one trajectory each.

    A static level-1 network (``HRLNet.static``) acts with ``StepScorer``:
    each environment runs on to the end of its decision point, then the
    new points of all of them are encoded in one batch; the trajectory
    keeps what the encoding reads once per point (``Trajectory.point_obs``)
    and each step's own rows (``obs``), all as the environment gave them
    (float32: no rounding between what the rollout acted on and what the
    update recomputes). Another network (or the teacher) steps the
    environments in lockstep, one batched forward pass per step, on their
    observations as stored (float16), which the update replays."""
    from hrlsched.agent.experts import Teacher
    from hrlsched.agent.nets import HRLNet, NetConfig

    torch.set_num_threads(1)
    net = None
    if spec.act != "teacher":
        assert spec.net_config is not None and spec.state_dict is not None
        cfg = dict(spec.net_config)
        net = HRLNet(NetConfig(**cfg["net"]), cfg["allocates"], cfg["places"])
        net.load_state_dict(spec.state_dict)
        net.eval()
    by_point = net is not None and net.static and spec.part == "allocate"
    last_value = None if net is None else lambda o: _value(net, o, spec.part, stored=not by_point)
    envs = cached_envs(spec.part, spec.workload_seed, spec.env_kwargs, len(spec.episode_seeds))
    eps = [Episode(env, s, spec, Teacher(spec.teacher), last_value) for env, s in zip(envs, spec.episode_seeds)]
    if by_point:
        _run_by_point(spec, net, eps)
    else:
        _run_lockstep(spec, net, eps)
    return [e.trajectory() for e in eps]


def _run_by_point(spec: RolloutSpec, net: Any, eps: list[Episode]) -> None:
    from hrlsched.agent.nets import ENCODER_KEYS

    rng = np.random.default_rng(int(spec.torch_seed))
    scorers = {id(e): StepScorer(net) for e in eps}
    live = [e for e in eps if e.live]
    while live:  # each live episode is at a new decision point
        for e in live:
            e.point_obs.append({k: e.obs[k] for k in ENCODER_KEYS})
        StepScorer.encode(net, [scorers[id(e)] for e in live], [e.point_obs[-1] for e in live])
        for e in live:
            sc, dp = scorers[id(e)], e.env.dp
            point = dp.decisions
            while e.live and dp.decisions == point:
                label = e.teacher.action(e.env) if spec.label else -1
                a, logp, value = sc.choose(e.obs, spec.act == "greedy", rng, spec.values)
                e.step(a, logp, value, {k: v for k, v in e.obs.items() if k not in ENCODER_KEYS}, label)
        live = [e for e in live if e.live]


def _run_lockstep(spec: RolloutSpec, net: Any, eps: list[Episode]) -> None:
    from hrlsched.agent.common.distributions import MaskedCategorical

    gen = torch.Generator().manual_seed(int(spec.torch_seed))
    while any(e.live for e in eps):
        live = [e for e in eps if e.live]
        labels = [e.teacher.action(e.env) for e in live] if spec.act == "teacher" or spec.label else None
        stored: list[dict[str, np.ndarray] | None] = [None] * len(live)
        if net is not None:
            with torch.inference_mode():
                # the observations as stored (float16): the update recomputes the log-probabilities on
                # those, so the ratio of new to old policy starts at 1
                stored = [_store(e.obs) for e in live]
                batch = to_tensors({k: np.stack([o[k] for o in stored]) for k in stored[0]}, batch=False)
                logits, value = net(batch, part=net_part(spec.part))
                dist = MaskedCategorical(logits, batch["action_mask"].bool())
                a = dist.greedy() if spec.act == "greedy" else dist.sample(gen)
                logp = dist.log_prob(a).numpy()
                a, value = a.numpy(), value.numpy()
        else:
            logp = value = np.zeros(len(live), dtype=np.float32)
        if spec.act == "teacher":
            a = np.asarray(labels)
        for j, e in enumerate(live):
            e.step(int(a[j]), float(logp[j]), float(value[j]), stored[j], labels[j] if labels is not None else -1)


class RolloutPool:
    """Runs ``RolloutSpec`` jobs on ``workers`` processes (``workers=0``:
    in this process). Processes are started with ``spawn`` (torch is not
    fork-safe once its threads ran) and kept for the whole training."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = int(workers)
        self._pool = None
        if self.workers > 0:
            ctx = mp.get_context("spawn")
            self._pool = ctx.Pool(self.workers, initializer=_init_worker)

    def map(self, specs: list[RolloutSpec]) -> list[list[Trajectory]]:
        if self._pool is None:
            return [run(s) for s in specs]
        res = self._pool.map_async(run, specs, chunksize=1)
        while True:  # a wait with a timeout lets Ctrl-C through (a bare get() would not)
            try:
                return res.get(timeout=0.5)
            except mp.TimeoutError:
                continue

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def _init_worker() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
