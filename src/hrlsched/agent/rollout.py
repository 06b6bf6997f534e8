"""Rollouts: whole (or time-truncated) episodes of several environments
stepped in lockstep, one batched forward pass per step, on a pool of
processes.

A job of the pool is ``RolloutSpec``: one workload seed, several episode
seeds (the *same arrival sequence* run several times, so that advantages
can be measured against the mean return of the other rollouts at the same
simulated time, Decima's input-dependent baseline), the network's weights,
and how to act (sample, greedy, or follow a heuristic teacher for behaviour
cloning). Observations are stored as float16 (features are of order one)
and masks as bool, to keep long episodes in memory.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hrlsched.agent.checkpoint import env_args
from hrlsched.agent.common.mlp import NumpyMLP
from hrlsched.agent.policy import CandidateScorer
from hrlsched.envs.features import DYN_COLUMNS

ENV_IDS = {"allocate": "hrlsched/Allocation-v0", "place": "hrlsched/Placement-v0", "all": "hrlsched/Hierarchical-v0"}
INT_KEYS = ("gpu_groups",)
_DYN = list(DYN_COLUMNS)
BOOL_KEYS = ("job_mask", "gpu_mask", "socket_mask", "link_mask", "current_job", "action_mask")


@dataclass
class RolloutSpec:
    part: str  # "allocate" (Allocation-v0), "place" (Placement-v0), "all" (Hierarchical-v0)
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
        _, value = net(to_tensors(_store(o) if stored else o), part=part)
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

    def encode(self, net: Any, point_obs: dict[str, np.ndarray]) -> None:
        """A new decision point: ``HRLNet.encode`` of its observation (the
        inputs it reads, ``ENCODER_KEYS``), without the padded job rows (as
        the ``hrl`` policy: attention without a mask, the same up to float
        rounding), through ``point``."""
        n = max(int(point_obs["job_mask"].sum()), 1)
        with torch.inference_mode():
            enc = net.encode(to_tensors({**point_obs, "jobs": point_obs["jobs"][:n],
                                         "job_mask": point_obs["job_mask"][:n]}))
        self._hj = enc["hj"][0].numpy()  # (the valid jobs' rows: the current job is among them)
        self.point(self._hj, enc["pooled"][0].numpy())

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


def run(spec: RolloutSpec) -> list[Trajectory]:
    """Run ``spec``'s episodes in lockstep; returns one trajectory each.

    A static level-1 network (``HRLNet.static``) acts with ``StepScorer``,
    one environment at a time: it encodes each decision point once, and
    the trajectory keeps what the encoding reads once per point
    (``Trajectory.point_obs``) and each step's own rows (``obs``), all as
    the environment gave them (float32: no rounding between what the
    rollout acted on and what the update recomputes). Another network
    scores the live environments in one batched forward pass per step, on
    their observations as stored (float16), which the update replays."""
    from hrlsched.agent.common.distributions import MaskedCategorical
    from hrlsched.agent.experts import Teacher
    from hrlsched.agent.nets import ENCODER_KEYS, HRLNet, NetConfig

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(int(spec.torch_seed))
    rng = np.random.default_rng(int(spec.torch_seed))
    net = None
    if spec.act != "teacher":
        assert spec.net_config is not None and spec.state_dict is not None
        cfg = dict(spec.net_config)
        net = HRLNet(NetConfig(**cfg["net"]), cfg["allocates"], cfg["places"])
        net.load_state_dict(spec.state_dict)
        net.eval()
    envs = cached_envs(spec.part, spec.workload_seed, spec.env_kwargs, len(spec.episode_seeds))
    teachers = [Teacher(spec.teacher) for _ in envs]
    by_point = net is not None and net.static and spec.part == "allocate"
    scorers = [StepScorer(net) for _ in envs] if by_point else []
    obs, live, bufs = [], [], []
    trajs = [Trajectory(workload_seed=spec.workload_seed, episode_seed=int(s)) for s in spec.episode_seeds]
    for env, s, te in zip(envs, spec.episode_seeds, teachers):
        o, _ = env.reset(seed=int(s))
        te.reset(env)
        obs.append(o)
        live.append(True)
        bufs.append({"obs": [], "points": [], "point_obs": [], "a": [], "logp": [], "v": [], "r": [], "t": [],
                     "teacher": [], "seen": -1})
    while any(live):
        idx = [i for i, ok in enumerate(live) if ok]
        tacts = [teachers[i].action(envs[i]) for i in idx] if spec.act == "teacher" or spec.label else None
        stored: list[dict[str, np.ndarray]] = []
        if by_point:
            assert net is not None
            a, logp, value = np.zeros(len(idx), dtype=np.int64), np.zeros(len(idx)), np.zeros(len(idx))
            for j, i in enumerate(idx):
                o, dp, b = obs[i], envs[i].dp, bufs[i]
                if dp.decisions != b["seen"]:  # a new decision point: keep and encode what the encoding reads
                    b["seen"] = dp.decisions
                    b["point_obs"].append({k: o[k] for k in ENCODER_KEYS})
                    scorers[i].encode(net, b["point_obs"][-1])
                a[j], logp[j], value[j] = scorers[i].choose(o, spec.act == "greedy", rng, spec.values)
                stored.append({k: v for k, v in o.items() if k not in ENCODER_KEYS})
        elif net is not None:
            with torch.inference_mode():
                # the observations as stored (float16): the update recomputes the log-probabilities on
                # those, so the ratio of new to old policy starts at 1
                stored = [_store(obs[i]) for i in idx]
                batch = to_tensors({k: np.stack([o[k] for o in stored]) for k in stored[0]}, batch=False)
                logits, value = net(batch, part=spec.part)
                dist = MaskedCategorical(logits, batch["action_mask"].bool())
                a = dist.greedy() if spec.act == "greedy" else dist.sample(gen)
                logp = dist.log_prob(a).numpy()
                a, value = a.numpy(), value.numpy()
        else:
            a = np.asarray(tacts)
            logp = value = np.zeros(len(idx), dtype=np.float32)
        if spec.act == "teacher":
            a = np.asarray(tacts)
        for j, i in enumerate(idx):
            env, b = envs[i], bufs[i]
            if spec.record:
                b["obs"].append(stored[j] if net is not None else _store(obs[i]))
                b["teacher"].append(tacts[j] if tacts is not None else -1)
            b["points"].append(env.dp.decisions)
            b["a"].append(int(a[j]))
            b["logp"].append(float(logp[j]))
            b["v"].append(float(value[j]))
            b["t"].append(float(env._view.time_s) if env._view is not None else 0.0)
            o, r, te, tr, info = env.step(int(a[j]))
            b["r"].append(float(r))
            obs[i] = o
            if te or tr:
                live[i] = False
                tj = trajs[i]
                tj.terminated = bool(te)
                if tr and not te and net is not None:
                    tj.last_value = _value(net, o, spec.part, stored=not by_point)
                tj.job_seconds = float(info["job_seconds"])
                # jobs that arrived (all of them when the workload is done)
                tj.jobs = len(env._sim.jobs) if te else int(env._sim.state.next_arrival)
                tj.decision_points = int(info["decision_points"])
    for tj, b in zip(trajs, bufs):
        tj.actions = np.asarray(b["a"], dtype=np.int64)
        tj.logp = np.asarray(b["logp"], dtype=np.float32)
        tj.values = np.asarray(b["v"], dtype=np.float32)
        tj.rewards = np.asarray(b["r"], dtype=np.float32)
        tj.times = np.asarray(b["t"])
        tj.teacher = np.asarray(b["teacher"], dtype=np.int64)
        # each step's decision point, numbered from 0 in the episode (``point_obs``' rows when kept)
        pts = np.asarray(b["points"], dtype=np.int64)
        tj.points = (np.cumsum(np.diff(pts, prepend=pts[:1]) != 0) if pts.size else pts).astype(np.int32)
        if spec.record and b["obs"]:
            tj.obs = {k: np.stack([o[k] for o in b["obs"]]) for k in b["obs"][0]}
            if b["point_obs"]:
                tj.point_obs = {k: np.stack([o[k] for o in b["point_obs"]]) for k in b["point_obs"][0]}
    return trajs


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
