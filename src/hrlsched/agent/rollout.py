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

import multiprocessing as mp
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hrlsched.agent.checkpoint import env_args

ENV_IDS = {"allocate": "hrlsched/Allocation-v0", "place": "hrlsched/Placement-v0", "all": "hrlsched/Hierarchical-v0"}
INT_KEYS = ("gpu_groups",)
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
    torch_seed: int = 0


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


def _value(net: Any, o: dict[str, np.ndarray], part: str) -> float:
    """The value head on one observation, as stored."""
    with torch.inference_mode():
        _, value = net(to_tensors(_store(o)), part=part)
    return float(value.reshape(-1)[0])


def run(spec: RolloutSpec) -> list[Trajectory]:
    """Run ``spec``'s episodes in lockstep; returns one trajectory each."""
    from hrlsched.agent.common.distributions import MaskedCategorical
    from hrlsched.agent.experts import Teacher
    from hrlsched.agent.nets import HRLNet, NetConfig

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(int(spec.torch_seed))
    net = None
    if spec.act != "teacher":
        assert spec.net_config is not None and spec.state_dict is not None
        cfg = dict(spec.net_config)
        net = HRLNet(NetConfig(**cfg["net"]), cfg["allocates"], cfg["places"])
        net.load_state_dict(spec.state_dict)
        net.eval()
    envs = cached_envs(spec.part, spec.workload_seed, spec.env_kwargs, len(spec.episode_seeds))
    teachers = [Teacher(spec.teacher) for _ in envs]
    # A static level-1 network encodes each decision point once (``HRLNet.encode``)
    cached = net is not None and net.static and spec.part == "allocate"
    encs: list[dict[str, torch.Tensor] | None] = [None] * len(envs)
    points = [-1] * len(envs)
    obs, live, bufs = [], [], []
    trajs = [Trajectory(workload_seed=spec.workload_seed, episode_seed=int(s)) for s in spec.episode_seeds]
    for env, s, te in zip(envs, spec.episode_seeds, teachers):
        o, _ = env.reset(seed=int(s))
        te.reset(env)
        obs.append(o)
        live.append(True)
        bufs.append({"obs": [], "a": [], "logp": [], "v": [], "r": [], "t": [], "teacher": []})
    while any(live):
        idx = [i for i, ok in enumerate(live) if ok]
        tacts = [teachers[i].action(envs[i]) for i in idx] if spec.act == "teacher" or spec.label else None
        if net is not None:
            with torch.inference_mode():
                # the observations as stored (float16): the update recomputes the log-probabilities on
                # those, so the ratio of new to old policy starts at 1
                stored = [_store(obs[i]) for i in idx]
                batch = to_tensors({k: np.stack([o[k] for o in stored]) for k in stored[0]}, batch=False)
                if cached:
                    fresh = [j for j, i in enumerate(idx) if envs[i].dp.decisions != points[i]]
                    if fresh:
                        e = net.encode({k: v[fresh] for k, v in batch.items()})
                        for n, j in enumerate(fresh):
                            encs[idx[j]] = {k: v[n:n + 1] for k, v in e.items()}
                            points[idx[j]] = envs[idx[j]].dp.decisions
                    enc = {k: torch.cat([encs[i][k] for i in idx]) for k in encs[idx[0]]}  # type: ignore[index]
                    logits, value = net.heads(batch, enc, part=spec.part)
                else:
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
                    tj.last_value = _value(net, o, spec.part)
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
        if spec.record and b["obs"]:
            tj.obs = {k: np.stack([o[k] for o in b["obs"]]) for k in b["obs"][0]}
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
