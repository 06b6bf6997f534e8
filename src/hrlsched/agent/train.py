"""Training of the hierarchical agent: behaviour cloning, then PPO, in one
loop that reads top to bottom (CleanRL style).

1. Behaviour cloning (``bc_episodes`` > 0 and no checkpoint to start from):
   teacher episodes (``optimus`` allocation, ``pack`` placement) on training
   workloads, cross-entropy of the teacher's actions under the masked
   distribution; imitation accuracy on a held-back workload (seed 100).
2. PPO, each iteration:
   - rollouts: ``workers`` workloads drawn from the training seeds
     (>= 1000), each run ``rollouts`` times (same arrival sequence, other
     sampling seeds), episodes truncated at the curriculum's simulated time
     ``horizon_h`` (growing each iteration from ``horizon_start_h`` until it
     covers a full load-and-drain cycle);
   - advantages: the undiscounted return to go of each step minus the mean,
     over the rollouts of the same workload, of their return to go at the
     same simulated time (Decima's input-dependent baseline, ``advantage:
     decima``), or GAE(gamma, lambda) on the value head (``advantage: gae``);
     normalised over the batch;
   - optional differential reward (Decima): each step's reward minus the
     average reward per simulated second times its elapsed seconds, which
     keeps returns of long episodes bounded;
   - ``epochs`` passes over minibatches (of whole decision points for a
     static level-1 network, which encodes each point once: ``Steps``):
     the clipped surrogate with the masks stored with each step, value
     loss on the scaled return, entropy bonus on the choice among the real
     allocations (not *wait* or *keep*: ``entropy_slots``) whose weight
     decays linearly from ``ent_coef`` to ``ent_coef_end``; gradients
     clipped to ``max_grad_norm``. Each iteration's environment steps per
     second (rollouts and update) are logged (``steps_per_s``).
3. Every ``eval_every_min`` minutes, a greedy evaluation on the held-back
   seeds (100-104; never 0-99, which are the evaluation seeds of every
   reported figure) keeps the best checkpoint (``best.pt``); ``last.pt`` is
   written every ``checkpoint_every_min`` minutes and at the end, and
   ``--resume`` continues from it (weights, optimiser, RNG states, step).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hrlsched.agent import bc
from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.common import checkpoint as common_ckpt
from hrlsched.agent.common import returns
from hrlsched.agent.common.distributions import MaskedCategorical
from hrlsched.agent.common.logger import CSVLogger, write_csv
from hrlsched.agent.common.loop import train_within_budget
from hrlsched.agent.common.training_run import RunConfig
from hrlsched.agent.nets import HRLNet, NetConfig
from hrlsched.agent.rollout import RolloutPool, RolloutSpec, Trajectory, net_part
from hrlsched.envs.candidates import KEEP, WAIT, WORKER_OPTIONS
from hrlsched.policies.hint import HintConfig

LEVEL_PARTS = {"1": "allocate", "2": "place", "both": "all", "flat": "flat"}
METRICS = ["iteration", "env_steps", "horizon_h", "steps", "return", "avg_jct_h_finished", "ent_coef", "rollout_s",
           "update_s", "steps_per_s", "pg", "vf", "ent", "kl", "clipfrac", "wall_s", "valid_avg_jct_h",
           "best_valid_avg_jct_h"]  # metrics.csv columns (a value not measured: nan)


@dataclass
class TrainConfig(RunConfig):
    # "1": Allocation-v0 (pack places), "2": Placement-v0, "both": Hierarchical-v0, "flat": Flat-v0 (one
    # level, workers placed one by one: the flat agent of docs/hierarchy.md; no teacher to clone)
    level: str = "1"
    placement: str = "pack"  # the heuristic placement of level 1 (and the level-2 teacher)
    allocation: str = "optimus"  # the heuristic allocation of level 2, and the level-1 teacher
    # level 1's hint and rule weights (policies.hint.HintConfig as text, e.g. "a=1.25,menu,g=8";
    # "": the paper's Optimus; "p=none": no hint); None: the --init checkpoint's, else ""
    hint: str | None = None
    # the level-1 menu's worker counts (a finer menu, 1-8, 12, 16, 24, 32, did not help the cloned policy)
    worker_options: list[int] = field(default_factory=lambda: list(WORKER_OPTIONS))
    max_jobs: int = 64
    minutes: float | None = 60.0  # (the budget, bookkeeping and seeds are RunConfig's)
    workers: int = 2
    rollouts: int = 4  # episodes per workload (same arrivals), for the baseline
    # behaviour cloning
    bc_episodes: int = 4
    bc_epochs: int = 4
    bc_lr: float = 1e-3
    # clone also after --init: the joint phase, started from a level-1 checkpoint, first teaches its new
    # placement heads (and the encoders, which now read what moves within a point) the heuristics
    bc_after_init: bool = False
    # curriculum on the simulated horizon of an episode
    horizon_start_h: float = 3.0
    horizon_growth_h: float = 0.5  # per iteration
    horizon_max_h: float | None = None  # None: run to the end of the workload
    # PPO
    lr: float = 1e-4
    epochs: int = 2
    minibatch: int = 512
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    ent_coef_end: float = 0.001
    max_grad_norm: float = 0.5
    advantage: str = "decima"  # or "gae"
    gamma: float = 1.0
    gae_lambda: float = 0.95
    differential_reward: bool = False
    value_scale: float = 10.0  # returns are divided by this for the value loss
    # bookkeeping
    eval_every_min: float = 10.0
    checkpoint_every_min: float = 5.0
    net: dict[str, Any] = field(default_factory=lambda: NetConfig().to_dict())

    def validate(self) -> None:
        if self.level not in LEVEL_PARTS:
            raise ValueError(f"level: expected one of {sorted(LEVEL_PARTS)}, got {self.level!r}")
        super().validate()
        for name in ("workers", "rollouts", "epochs", "minibatch", "max_jobs"):
            if getattr(self, name) < (0 if name == "workers" else 1):
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)}")
        if self.level == "flat" and self.bc_episodes > 0:
            raise ValueError("bc_episodes: expected 0 with level flat (no heuristic teacher acts in Flat-v0's "
                             f"layout), got {self.bc_episodes}")
        if self.advantage not in ("decima", "gae"):
            raise ValueError(f"advantage: expected 'decima' or 'gae', got {self.advantage!r}")
        NetConfig(**self.net)
        self.hint_config()

    def hint_config(self) -> HintConfig | None:
        """Level 1's hint (None at level 2 and flat, which have no level 1)."""
        return None if self.level in ("2", "flat") else HintConfig.parse(self.hint or "")

    @property
    def part(self) -> str:
        return LEVEL_PARTS[self.level]

    def env_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"scenario": self.scenario, "overrides": list(self.overrides),
                              "max_jobs": self.max_jobs, "placement": self.placement,
                              "worker_options": list(self.worker_options)}
        hint = self.hint_config()
        if hint is None:
            if self.level != "flat":  # (Flat-v0 runs no heuristic allocation)
                kw["allocation"] = self.allocation
        else:
            kw.update(hint.env_kwargs(self.worker_options))
        return kw


# ----------------------------------------------------------------- advantages
def decima_baseline(group: list[Trajectory], rtgs: list[np.ndarray]) -> list[np.ndarray]:
    """For each step of each rollout: the mean over the rollouts of the same
    workload of their return to go from the same simulated time."""
    out = []
    for tr in group:
        b = np.zeros(tr.steps)
        for other, g in zip(group, rtgs):
            i = np.searchsorted(other.times, tr.times, side="left")
            b += np.where(i < other.steps, g[np.minimum(i, other.steps - 1)], 0.0)
        out.append(b / len(group))
    return out


def gae(tr: Trajectory, rewards: np.ndarray, scale: float, gamma: float, lam: float) -> np.ndarray:
    """GAE on the value head's values (``scale`` x the scaled return); an
    episode truncated at the curriculum's horizon bootstraps from the value
    of the state it was cut at (``Trajectory.last_value``)."""
    v = tr.values.astype(np.float64) * scale
    last = 0.0 if tr.terminated else float(tr.last_value) * scale
    return returns.gae(rewards, v, np.append(v[1:], last), gamma, lam)


def init_net(net: dict[str, Any], init: dict[str, Any]) -> dict[str, Any]:
    """The network settings of a run started from weights whose network is
    ``init`` (``--init``): its shape, since the weights only fit that (the
    shipped agent is narrower than ``NetConfig``'s defaults); ``net``, the
    run's setting, may only repeat it (left at the defaults, it is replaced)."""
    default = NetConfig().to_dict()
    shape = ("d", "heads", "job_layers", "hidden", "static_point")
    for k in shape:
        if net.get(k, default[k]) not in (default[k], init.get(k, default[k])):
            raise ValueError(f"net.{k}: the --init checkpoint's network has {k}={init.get(k, default[k])!r}, "
                             f"got {net[k]!r} (leave net unset to take the checkpoint's)")
    return {**net, **{k: init.get(k, default[k]) for k in shape}}  # (the rule weights follow the hint)


# ---------------------------------------------------------------- the update
@dataclass
class Steps:
    """An iteration's steps as the update reads them: each step's
    observation (``obs``), action, log-probability when it was taken,
    normalised advantage and scaled return; for a static network, what it
    encodes once per decision point (``point_obs``, row ``point[i]`` for
    step ``i``; ``obs`` then holds each step's own rows, as the rollouts
    keep them, ``Trajectory.point_obs``)."""

    obs: dict[str, np.ndarray]
    point_obs: dict[str, np.ndarray]
    point: np.ndarray  # each step's decision point, numbered over the iteration (a point's steps are contiguous)
    act: torch.Tensor
    old_logp: torch.Tensor
    adv: torch.Tensor
    ret: torch.Tensor

    @classmethod
    def of(cls, trajs: list[Trajectory], adv: np.ndarray, ret: np.ndarray) -> Steps:
        """The steps of ``trajs`` in order, with their advantages and returns (concatenated in that order)."""
        kept = [t for t in trajs if t.steps]
        first = 0
        points = []
        for t in kept:
            points.append(t.points.astype(np.int64) + first)
            first += len(next(iter(t.point_obs.values()))) if t.point_obs else int(t.points.max()) + 1
        return cls(obs={k: np.concatenate([t.obs[k] for t in kept]) for k in kept[0].obs},
                   point_obs={k: np.concatenate([t.point_obs[k] for t in kept]) for k in kept[0].point_obs},
                   point=np.concatenate(points),
                   act=torch.from_numpy(np.concatenate([t.actions for t in kept])),
                   old_logp=torch.from_numpy(np.concatenate([t.logp for t in kept])),
                   adv=torch.from_numpy(np.asarray(adv, dtype=np.float32)),
                   ret=torch.from_numpy(np.asarray(ret, dtype=np.float32)))

    @property
    def size(self) -> int:
        return int(self.act.numel())

    def minibatches(self, size: int, rng: np.random.Generator, by_point: bool) -> list[np.ndarray]:
        """One epoch's minibatches of step indices (ascending), about
        ``size`` steps each, in a random order; ``by_point``: of whole
        decision points (each encoded once), in a random order of points."""
        n = self.size
        if not by_point:
            order = rng.permutation(n)
            return [np.sort(order[s:s + size]) for s in range(0, n, size)]
        counts = np.bincount(self.point)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        order = rng.permutation(counts.size)
        # a point goes to the minibatch where its first step falls in the shuffled order
        chunk = (np.cumsum(counts[order]) - counts[order]) // size
        out = []
        for c in range(int(chunk[-1]) + 1):
            pts = np.sort(order[chunk == c])
            out.append(np.concatenate([np.arange(starts[p], starts[p] + counts[p]) for p in pts]))
        return out

    def outputs(self, net: HRLNet, idx: np.ndarray, part: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The network's logits and values on the steps ``idx``, and their masks."""
        b = bc.batch(self.obs, idx)
        mask = b["action_mask"].bool()
        if not self.point_obs:
            logits, value = net(b, part=part, valid=mask)
        else:
            pts, row = np.unique(self.point[idx], return_inverse=True)
            pb = bc.batch(self.point_obs, pts)
            # no job row that is padding at every point (the encoding is the same up to float rounding:
            # attention gives padded rows no weight; a point's jobs come first)
            n = max(int(pb["job_mask"].any(0).nonzero().max()) + 1 if pb["job_mask"].any() else 1, 1)
            pb["jobs"], pb["job_mask"] = pb["jobs"][:, :n], pb["job_mask"][:, :n]
            logits, value = net.forward_by_point(b, pb, torch.from_numpy(row), part, valid=mask)
        return logits, value, mask


def entropy_slots(net: HRLNet, part: str, n_actions: int) -> torch.Tensor | None:
    """The actions the entropy bonus spreads probability over: all but the
    allocation menu's *wait* and *keep* (``envs.candidates``: slots 0 and 1
    of ``part``'s layout when it allocates). Rarely right when taken at
    random, they would gain probability from a bonus on the whole
    distribution's entropy, most where the policy is surest of a real
    allocation; the bonus is on the entropy of the choice among the real
    allocations instead (``MaskedCategorical.entropy(among)``), which does
    not depend on wait's or keep's logits. None: every action (placement)."""
    if not net.allocates or part == "place":
        return None
    among = torch.ones(n_actions, dtype=torch.bool)
    among[[WAIT, KEEP]] = False
    return among


def ppo_loss(net: HRLNet, data: Steps, idx: np.ndarray, part: str, clip: float, vf_coef: float,
             ent_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate, the value loss and the entropy bonus on the
    steps ``idx`` (with the masks stored with each step), and their figures."""
    logits, value, mask = data.outputs(net, idx, part)
    dist = MaskedCategorical(logits, mask)
    logp = dist.log_prob(data.act[idx])
    ratio = (logp - data.old_logp[idx]).exp()
    a = data.adv[idx]
    pg = torch.max(-a * ratio, -a * ratio.clamp(1 - clip, 1 + clip)).mean()
    vf = 0.5 * (value - data.ret[idx]).pow(2).mean()
    ent = dist.entropy(entropy_slots(net, part, logits.shape[-1])).mean()
    loss = pg + vf_coef * vf - ent_coef * ent
    with torch.no_grad():
        st = {"pg": float(pg), "vf": float(vf), "ent": float(ent),
              "kl": float(((ratio - 1) - (logp - data.old_logp[idx])).mean()),
              "clipfrac": float(((ratio - 1).abs() > clip).float().mean())}
    return loss, st


# ---------------------------------------------------------------- the loop
class Trainer:
    def __init__(self, cfg: TrainConfig, out: Path, init: str | None = None, resume: bool = False,
                 log: Callable[[str], None] = print, pool: RolloutPool | None = None) -> None:
        cfg.validate()
        self.cfg, self.out, self.log = cfg, Path(out), log
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
        init_ck = ckpt.load(init) if init is not None and not resume else None
        if init_ck is not None:
            cfg.net = init_net(cfg.net, init_ck["net"]["net"])
        if cfg.hint is None and init_ck is not None and init_ck["part"] != "place" and cfg.level not in ("2", "flat"):
            cfg.hint = ckpt.hint_of(init_ck).text()  # the initial weights' hint, rules and all (config.yaml)
        hint = cfg.hint_config()
        if hint is not None:  # the rule weights are parameters of the network: it has them where the hint sets them
            cfg.net = {**cfg.net, "hint_gap": bool(cfg.net.get("hint_gap")) or hint.gap != 0,
                       "hint_bonus": bool(cfg.net.get("hint_bonus")) or hint.bonus is not None}
        torch.manual_seed(cfg.seed)  # (before the network: its initial weights are the seed's)
        random.seed(cfg.seed)
        self.net = HRLNet(NetConfig(**cfg.net), allocates=cfg.level in ("1", "both"), places=cfg.level != "1")
        self.opt = torch.optim.Adam(self.net.parameters(), lr=cfg.lr, eps=1e-5)
        self.rng = np.random.default_rng(cfg.seed)
        self.iteration = self.env_steps = 0
        self.elapsed_s = 0.0  # training wall time, summed over resumed runs
        self.best_jct_s = math.inf
        self.bc_done = False
        self.pool = pool if pool is not None else RolloutPool(cfg.workers)
        last = self.out / "last.pt"
        if resume:
            if not last.is_file():
                raise common_ckpt.CheckpointError(f"--resume: {last} does not exist; start without --resume")
            self._restore(ckpt.load(last))
            self.log(f"resumed from {last}: iteration {self.iteration}, {self.env_steps} env steps")
        else:
            if init_ck is not None:
                missing, unexpected = self.net.load_state_dict(init_ck["state_dict"], strict=False)
                self.bc_done = not cfg.bc_after_init
                self.log(f"initialised from {init}" + (f" (new heads: {sorted({k.split('.')[0] for k in missing})})"
                                                       if missing else ""))
            if hint is not None:  # the hint's rule weights, as set (an --init checkpoint's are its own)
                with torch.no_grad():
                    if hint.gap:
                        self.net.gap.fill_(hint.gap)
                    if hint.bonus is not None:
                        self.net.bonus.fill_(hint.bonus)

    # -- checkpoints
    def _payload(self) -> dict[str, Any]:
        return ckpt.policy_payload(
            self.net, self.cfg.part, self.cfg.env_kwargs(), config=dataclasses.asdict(self.cfg),
            optimizer=self.opt.state_dict(), iteration=self.iteration, env_steps=self.env_steps,
            elapsed_s=self.elapsed_s, best_jct_s=self.best_jct_s, bc_done=self.bc_done,
            rng=common_ckpt.rng_state(self.rng),
        )

    def _restore(self, ck: dict[str, Any]) -> None:
        self.net.load_state_dict(ck["state_dict"])
        self.opt.load_state_dict(ck["optimizer"])
        self.iteration, self.env_steps = int(ck["iteration"]), int(ck["env_steps"])
        self.elapsed_s, self.best_jct_s = float(ck["elapsed_s"]), float(ck["best_jct_s"])
        self.bc_done = bool(ck["bc_done"])
        common_ckpt.set_rng_state(self.rng, ck["rng"])

    def save(self, name: str = "last.pt") -> None:
        common_ckpt.save(self.out / name, self._payload())
        if name == "best.pt":  # what `hrl --checkpoint` needs, without the optimiser
            ckpt.export_policy(self.out / name, self.out / "best-policy.pt")

    def _spec(self, wseed: int, episode_seeds: list[int], **kw: Any) -> RolloutSpec:
        return RolloutSpec(self.cfg.part, self.cfg.env_kwargs(), int(wseed), episode_seeds,
                           net_config=self._payload_net(), state_dict=self.net.state_dict(), **kw)

    def _payload_net(self) -> dict[str, Any]:
        return {"net": self.net.cfg.to_dict(), "allocates": self.net.allocates, "places": self.net.places}

    # -- behaviour cloning
    def behaviour_clone(self) -> None:
        cfg = self.cfg
        seeds = [int(s) for s in self.rng.choice(cfg.train_seeds, size=cfg.bc_episodes, replace=False)]
        specs = [RolloutSpec(cfg.part, cfg.env_kwargs(), s, [0], act="teacher", label=True, teacher=cfg.allocation)
                 for s in seeds]
        specs.append(RolloutSpec(cfg.part, cfg.env_kwargs(), cfg.valid_seeds[0], [0], act="teacher", label=True,
                                 teacher=cfg.allocation))
        t0 = time.time()
        groups = self.pool.map(specs)
        train = bc.dataset([t for g in groups[:-1] for t in g])
        valid = bc.dataset(groups[-1])
        self.log(f"behaviour cloning: {train.size} teacher steps on seeds {seeds} "
                 f"({time.time() - t0:.0f} s); validation on seed {cfg.valid_seeds[0]}: {valid.size} steps")
        before = bc.evaluate(self.net, valid, cfg.part)
        hist = bc.fit(self.net, train, cfg.part, epochs=cfg.bc_epochs, lr=cfg.bc_lr, seed=cfg.seed, valid=valid,
                      log=lambda r: self.log("  bc " + ", ".join(f"{k} {v:.4g}" for k, v in r.items())))
        rows = [{"epoch": 0, "train_loss": float("nan"), **{f"valid_{k}": v for k, v in before.items()}}, *hist]
        write_csv(self.out / "bc.csv", rows, list(rows[-1]))
        self.bc_done = True
        self.save("bc.pt")

    # -- evaluation on held-back seeds
    def evaluate(self) -> float:
        specs = [self._spec(s, [0], act="greedy", record=False, values=False) for s in self.cfg.valid_seeds]
        trajs = [g[0] for g in self.pool.map(specs)]
        return float(np.mean([t.avg_jct_s for t in trajs]))

    # -- one PPO iteration
    def horizon_s(self) -> float | None:
        cfg = self.cfg
        h = cfg.horizon_start_h + cfg.horizon_growth_h * self.iteration
        if cfg.horizon_max_h is not None:
            h = min(h, cfg.horizon_max_h)
        return h * 3600.0

    def iterate(self, frac_done: float) -> dict[str, Any]:
        cfg, net = self.cfg, self.net
        kw = self.cfg.env_kwargs()
        horizon = self.horizon_s()
        kw["max_time_s"] = horizon
        wseeds = self.rng.choice(cfg.train_seeds, size=max(cfg.workers, 1), replace=False)
        specs = [RolloutSpec(cfg.part, kw, int(w), [int(x) for x in self.rng.integers(2**31, size=cfg.rollouts)],
                             net_config=self._payload_net(), state_dict=net.state_dict(),
                             torch_seed=int(self.rng.integers(2**31)), values=cfg.advantage == "gae") for w in wseeds]
        t0 = time.time()
        groups = self.pool.map(specs)
        t_roll = time.time() - t0
        # advantages and returns
        advs, rets, ep_returns = [], [], []
        for group in groups:
            rewards = []
            for tr in group:
                r = tr.rewards.astype(np.float64)
                if cfg.differential_reward:
                    dt = np.diff(np.append(tr.times, tr.times[-1]))
                    rate = r.sum() / max(tr.times[-1] - tr.times[0], 1.0)
                    r = r - rate * dt
                rewards.append(r)
            rtgs = [returns.returns_to_go(r, cfg.gamma) for r in rewards]
            if cfg.advantage == "decima":
                base = decima_baseline(group, rtgs)
                group_adv = [g - b for g, b in zip(rtgs, base)]
            else:
                group_adv = [gae(tr, r, cfg.value_scale, cfg.gamma, cfg.gae_lambda) for tr, r in zip(group, rewards)]
            advs += group_adv
            rets += rtgs
            ep_returns += [float(tr.rewards.sum()) for tr in group]
        adv = np.concatenate(advs)
        data = Steps.of([tr for g in groups for tr in g], (adv - adv.mean()) / (adv.std() + 1e-8),
                        np.concatenate(rets) / cfg.value_scale)
        n = data.size
        self.env_steps += n
        # PPO update
        ent_coef = cfg.ent_coef + (cfg.ent_coef_end - cfg.ent_coef) * min(frac_done, 1.0)
        net.train()
        stats: dict[str, list[float]] = {"pg": [], "vf": [], "ent": [], "kl": [], "clipfrac": []}
        t1 = time.time()
        for _ in range(cfg.epochs):
            for idx in data.minibatches(cfg.minibatch, self.rng, by_point=net.static):
                loss, st = ppo_loss(net, data, idx, net_part(cfg.part), cfg.clip, cfg.vf_coef, ent_coef)
                self.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
                self.opt.step()
                for k, v in st.items():
                    stats[k].append(v)
        self.iteration += 1
        done_jobs = [t.avg_jct_s for g in groups for t in g if t.terminated]
        return {
            "iteration": self.iteration, "env_steps": self.env_steps, "horizon_h": (horizon or 0) / 3600,
            "steps": n, "return": float(np.mean(ep_returns)), "avg_jct_h_finished":
            float(np.mean(done_jobs) / 3600) if done_jobs else float("nan"), "ent_coef": ent_coef,
            "rollout_s": t_roll, "update_s": time.time() - t1, **{k: float(np.mean(v)) for k, v in stats.items()},
            "steps_per_s": n / max(time.time() - t0, 1e-9),
        }

    # -- the whole run
    def run(self, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        cfg = self.cfg
        start = time.time()
        base_elapsed = self.elapsed_s
        try:
            if not self.bc_done and cfg.bc_episodes > 0:
                self.behaviour_clone()
                self.save()
            start_row = {"iteration": self.iteration, "env_steps": self.env_steps, "steps": 0, "rollout_s": 0.0,
                         "update_s": 0.0}
            jct = train_within_budget(self, self.iterate, lambda: self.env_steps,
                                      CSVLogger(self.out / "metrics.csv", METRICS, missing=math.nan), start_row,
                                      progress, start, base_elapsed)
            return {"iterations": self.iteration, "env_steps": self.env_steps, "final_valid_avg_jct_h": jct / 3600,
                    "best_valid_avg_jct_h": self.best_jct_s / 3600, "elapsed_s": self.elapsed_s}
        finally:
            self.pool.close()
