"""What DL2 and Harmony share: how they act and how they are trained (the
two come from the same group and learn the same way), on the learned
schedulers' common parts (``hrlsched.agent.common``).

- ``ActorCriticConfig``: the settings they share (and their checks);
- ``CheckpointKind``: a rival's checkpoints, of its ``kind`` and feature
  lists (``agent.common.checkpoint``): loaded, built into its config and
  network, exported (float16 weights: what is shipped);
- ``ActorCriticScheduler``: the scheduler's state inside the engine
  (greedy) and in training (sampled, with job-aware exploration of
  probability ``epsilon``, the behaviour probability ``mu`` of each action
  kept for the replay's importance weights);
- ``ActorCriticTrainer``: actor-critic with experience replay (the newest
  samples, minibatches drawn uniformly, truncated importance weights
  min(1, pi/mu) as ACER), an entropy bonus, epsilon decaying linearly over
  the budget, checkpoints and ``--resume``, the budgeted loop
  (``agent.common.loop``);
- ``train_command``: ``hrlsched train --agent dl2|harmony``.

The actor and the critic are separate networks with their own optimisers
(``policy_params``, ``value_params`` of the rival's network).
"""

from __future__ import annotations

import dataclasses
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from hrlsched.agent.common import checkpoint as common
from hrlsched.agent.common.checkpoint import CheckpointError
from hrlsched.agent.common.distributions import MaskedCategorical
from hrlsched.agent.common.logger import CSVLogger
from hrlsched.agent.common.loop import train_within_budget
from hrlsched.agent.common.shipped import checkpoint_path, shipped_checkpoint
from hrlsched.agent.common.training_run import RunConfig, check_fields, run_config, write_config
from hrlsched.contract import Scheduler
from hrlsched.rivals.replay import ReplayBuffer


# ------------------------------------------------------------------- config
@dataclass
class ActorCriticConfig(RunConfig):
    """The settings of DL2's and Harmony's training (each sets its own
    defaults where they differ)."""

    hidden: int = 64  # width of the hidden layers (the policy network's; Harmony's critic too)
    # supervised warm-up of the actor on a heuristic teacher (0 episodes: none)
    sl_episodes: int = 4
    sl_epochs: int = 10
    sl_lr: float = 3e-3
    sl_minibatch: int = 64
    # actor-critic
    gamma: float = 0.99
    gae_lambda: float = 0.95  # advantages: GAE over inferences
    lr: float = 2e-4
    value_lr: float = 1e-3
    entropy: float = 0.001
    replay: int = 65536
    minibatch: int = 256
    updates: int = 64  # minibatch updates after each episode
    epsilon: float = 0.1  # job-aware exploration, decays linearly to epsilon_end
    epsilon_end: float = 0.0
    is_clip: float = 1.0  # truncation of the replay's importance weights (ACER's c)
    horizon_h: float | None = 12.0  # training episodes stop after this simulated time (None: whole workload)

    def validate(self) -> None:
        super().validate()
        check_fields(self, ("hidden", "replay", "minibatch", "sl_minibatch"), lambda v: int(v) >= 1,
                     "a positive integer")
        check_fields(self, ("sl_episodes", "sl_epochs", "updates"), lambda v: int(v) >= 0, "an integer >= 0")
        check_fields(self, ("gamma", "gae_lambda", "epsilon", "epsilon_end"), lambda v: 0.0 <= float(v) <= 1.0,
                     "a value in [0, 1]")
        check_fields(self, ("lr", "value_lr", "sl_lr", "is_clip"), lambda v: float(v) > 0, "a positive value")
        check_fields(self, ("entropy",), lambda v: float(v) >= 0, "a value >= 0")
        check_fields(self, ("horizon_h",), lambda v: v is None or v > 0, "a positive number of hours or null")


# -------------------------------------------------------------- checkpoints
@dataclass(frozen=True)
class CheckpointKind:
    """The checkpoints of one rival: ``kind`` (``dl2``, ``harmony``), the
    feature lists its network reads, its config and network classes, the
    shipped checkpoint (a path below ``src/hrlsched``) and the entries an
    export keeps beyond the weights, the config and the progress."""

    kind: str
    features: dict[str, list[str]]
    config: type
    net: type
    shipped: str
    export_keys: tuple[str, ...] = ()

    def load(self, path: str | Path) -> dict[str, Any]:
        """A checkpoint of this kind whose feature lists are this version's
        (``CheckpointError`` naming what differs otherwise)."""
        return common.load(path, self.kind, "features", self.features, required=("config", "state_dict"))

    def build(self, ck: dict[str, Any]) -> tuple[Any, nn.Module]:
        """The config and the network (evaluation mode) of a checkpoint."""
        known = {f.name for f in dataclasses.fields(self.config)}
        cfg = self.config(**{k: v for k, v in ck["config"].items() if k in known})
        net = self.net(cfg)
        net.load_state_dict(common.float_state(ck["state_dict"]))
        net.eval()
        return cfg, net

    def export(self, src: str | Path, dst: str | Path) -> None:
        """A training checkpoint's weights alone, in float16, with its
        config, progress and ``export_keys``: what is shipped."""
        ck = self.load(src)
        keep = {k: ck[k] for k in ("kind", "config", "features", "episodes", "steps", "elapsed_s", "best_jct_s",
                                   *self.export_keys)}
        common.save(dst, {**keep, "state_dict": common.half_state(ck["state_dict"])})


# ---------------------------------------------------------------- scheduler
class ActorCriticScheduler(Scheduler):
    """A rival inside the engine, from its shipped checkpoint, another one
    (``checkpoint``) or a network in training (``net`` and ``cfg``). ``act``:
    "greedy" (inside the engine), "sample" (training), or one of the rival's
    heuristics played in its action space (a teacher, "random")."""

    decision_points = "events"
    checkpoints: ClassVar[CheckpointKind]

    def __init__(self, checkpoint: str | Path | None = None, *, net: nn.Module | None = None,
                 cfg: Any = None, act: str = "greedy") -> None:
        if net is None:
            ck = self.checkpoints
            cfg, net = ck.build(ck.load(checkpoint_path(checkpoint) if checkpoint else shipped_checkpoint(ck.shipped)))
        assert cfg is not None
        self.cfg = cfg
        self.set_net(net)
        self.act = act
        self.rng = np.random.default_rng(0)
        self.epsilon = 0.0
        self.mu = 1.0  # behaviour probability of the last action chosen
        self.recording = False

    @abstractmethod
    def set_net(self, net: nn.Module) -> None:
        """Take the network's weights (frozen in numpy)."""


# ------------------------------------------------------------------ trainer
class ActorCriticTrainer(ABC):
    """The training of a rival after its warm-up (``warm_up``): episodes of
    the sampling scheduler on training workloads (``rollout``), their
    samples into the replay (``remember``), ``updates`` minibatch updates
    after each (``forward``: a minibatch's logits, mask, value and value
    target). ``init``: start from a checkpoint's weights; ``resume``:
    continue the run in ``out`` (``last.pt``)."""

    checkpoints: ClassVar[CheckpointKind]
    scheduler: ClassVar[type[ActorCriticScheduler]]
    metrics: ClassVar[list[str]]  # metrics.csv columns
    progress_field: ClassVar[tuple[str, str]]  # the label and key of the rival's own count in progress lines
    warm_up_after_init: ClassVar[bool]  # whether a run started from a checkpoint's weights warms up still

    def __init__(self, cfg: Any, out: Path, log: Callable[[str], None], init: str | None = None,
                 resume: bool = False) -> None:
        from hrlsched.envs.pool import WorkloadPool

        cfg.validate()
        self.cfg, self.out, self.log = cfg, Path(out), log
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(1)
        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.net = self.checkpoints.net(cfg)
        self.opt_pi = torch.optim.Adam(self.net.policy_params(), lr=cfg.lr)
        self.opt_v = torch.optim.Adam(self.net.value_params(), lr=cfg.value_lr)
        self.pool = WorkloadPool(cfg.scenario, [*cfg.train_seeds, *cfg.valid_seeds], cfg.overrides)
        self.replay = ReplayBuffer(cfg.replay)
        self.episodes = self.steps = 0
        self.elapsed_s = 0.0
        self.best_jct_s = math.inf
        self.sl_done = False
        self.setup()
        if resume:
            last = self.out / "last.pt"
            if not last.is_file():
                raise CheckpointError(f"--resume: {last} does not exist; start without --resume")
            self.restore(self.checkpoints.load(last))
            self.log(f"resumed from {last}: {self.episodes} episodes, {self.steps} inferences")
        elif init is not None:
            _, net = self.checkpoints.build(self.checkpoints.load(init))
            self.net.load_state_dict(net.state_dict())
            self.sl_done = not self.warm_up_after_init
            self.log(f"initialised from {init}")

    def setup(self) -> None:  # noqa: B027
        """The rival's own training state, made before a checkpoint is
        restored into it."""

    def horizon_s(self) -> float | None:
        """Where training episodes stop (simulated seconds; None: at the
        workload's end)."""
        return self.cfg.horizon_h * 3600.0 if self.cfg.horizon_h else None

    # -- checkpoints
    def payload(self) -> dict[str, Any]:
        return {"kind": self.checkpoints.kind, "config": dataclasses.asdict(self.cfg),
                "features": self.checkpoints.features,
                "state_dict": {k: v.detach().clone() for k, v in self.net.state_dict().items()},
                "episodes": self.episodes, "steps": self.steps, "elapsed_s": self.elapsed_s,
                "best_jct_s": self.best_jct_s, "sl_done": self.sl_done, "opt_pi": self.opt_pi.state_dict(),
                "opt_v": self.opt_v.state_dict(), "rng": common.rng_state(self.rng)}

    def save(self, name: str = "last.pt") -> None:
        common.save(self.out / name, self.payload())

    def restore(self, ck: dict[str, Any]) -> None:
        self.net.load_state_dict(common.float_state(ck["state_dict"]))
        if "opt_pi" in ck:  # (an exported checkpoint has the weights alone)
            self.opt_pi.load_state_dict(ck["opt_pi"])
            self.opt_v.load_state_dict(ck["opt_v"])
            common.set_rng_state(self.rng, ck["rng"])
        self.episodes, self.steps = int(ck["episodes"]), int(ck["steps"])
        self.elapsed_s, self.best_jct_s = float(ck["elapsed_s"]), float(ck["best_jct_s"])
        self.sl_done = bool(ck.get("sl_done", True))

    # -- what each rival defines
    @abstractmethod
    def warm_up(self) -> None:
        """What comes before the actor-critic (once: a resumed run skips what
        its checkpoint says is done)."""

    @abstractmethod
    def rollout(self, wseed: int, sched: Any) -> Any:
        """A recorded training episode of ``sched`` on the workload of
        ``wseed`` (``actions``, ``rewards`` among its fields)."""

    @abstractmethod
    def remember(self, ep: Any) -> None:
        """An episode's samples into the replay (with their advantages and
        value targets)."""

    @abstractmethod
    def forward(self, b: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A replayed minibatch's logits, action mask, value and value target."""

    @abstractmethod
    def evaluate(self) -> float:
        """The greedy policy's mean average JCT (s) on the held-back seeds."""

    def after_update(self, ep: Any) -> dict[str, Any]:
        """The rival's work after an episode's updates; its metrics.csv entries."""
        return {}

    # -- shared
    def descend(self, opt: torch.optim.Optimizer, n: int, minibatch: int,
                loss: Callable[[np.ndarray], torch.Tensor]) -> list[float]:
        """One epoch of gradient steps on ``loss(idx)`` over minibatches of
        ``n`` samples in a random order; the loss of each."""
        order = self.rng.permutation(n)
        out = []
        for s in range(0, n, minibatch):
            value = loss(order[s:s + minibatch])
            opt.zero_grad()
            value.backward()
            opt.step()
            out.append(float(value.detach()))
        return out

    def update(self) -> dict[str, float]:
        """``updates`` minibatches from the replay: the policy gradient with
        truncated importance weights and the entropy bonus, then the critic's
        squared error."""
        cfg = self.cfg
        stats: dict[str, list[float]] = {"pg": [], "vf": [], "ent": []}
        for _ in range(cfg.updates):
            b = self.replay.sample(cfg.minibatch, self.rng)
            logits, mask, v, g = self.forward(b)
            adv = torch.from_numpy(b["adv"].astype(np.float32))
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            d = MaskedCategorical(logits, mask)
            logp = d.log_prob(torch.from_numpy(b["a"]))
            # truncated importance weights (ACER): replayed and explored actions count as
            # much as the current policy would take them, at most once
            w = (logp.detach() - torch.from_numpy(b["mu"]).clamp(min=1e-8).log()).exp().clamp(max=cfg.is_clip)
            pg = -(w * adv * logp).mean()
            ent = d.entropy().mean()
            self.opt_pi.zero_grad()
            (pg - cfg.entropy * ent).backward()
            nn.utils.clip_grad_norm_(self.net.policy_params(), 1.0)
            self.opt_pi.step()
            vf = (g - v).pow(2).mean()
            self.opt_v.zero_grad()
            vf.backward()
            self.opt_v.step()
            stats["pg"].append(float(pg.detach()))
            stats["vf"].append(float(vf.detach()))
            stats["ent"].append(float(ent.detach()))
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def episode(self, frac: float) -> dict[str, Any]:
        """One training episode and the updates after it (``frac``: the share
        of the budget spent, which sets the exploration's epsilon)."""
        cfg = self.cfg
        sched = self.scheduler(net=self.net, cfg=cfg, act="sample")
        sched.rng = np.random.default_rng(int(self.rng.integers(2**63)))
        sched.epsilon = cfg.epsilon + (cfg.epsilon_end - cfg.epsilon) * min(frac, 1.0)
        wseed = int(self.rng.choice(cfg.train_seeds))
        t0 = time.time()
        ep = self.rollout(wseed, sched)
        t_roll = time.time() - t0
        self.remember(ep)
        self.steps += int(ep.actions.size)
        self.episodes += 1
        stats = self.update() if self.replay.size >= cfg.minibatch else {"pg": math.nan, "vf": math.nan,
                                                                           "ent": math.nan}
        return {"episode": self.episodes, "seed": wseed, "inferences": int(ep.actions.size),
                "return": float(ep.rewards.sum()), "epsilon": sched.epsilon, "rollout_s": round(t_roll, 1),
                **stats, **self.after_update(ep)}

    def run(self, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        start, base = time.time(), self.elapsed_s
        self.warm_up()
        jct = train_within_budget(self, self.episode, lambda: self.steps, CSVLogger(self.out / "metrics.csv",
                                                                                    self.metrics),
                                  {"episode": self.episodes, "inferences": 0, "rollout_s": 0.0}, progress, start, base)
        return {"episodes": self.episodes, "steps": self.steps, "final_jct_s": jct, "best_jct_s": self.best_jct_s,
                "elapsed_s": self.elapsed_s}


def train_command(trainer_cls: type[ActorCriticTrainer], *, scenario: str, out: Path, minutes: float | None,
                  steps: int | None, workers: int, seeds: Sequence[int] | None, overrides: list[str], resume: bool,
                  seed: int, init: Path | None, backend: str, log: Any,
                  configure: Callable[[Any], None] | None = None) -> int:
    """``hrlsched train --agent NAME`` for DL2 and Harmony: the run's
    directory and config (a new one, with ``configure`` applied to it (the
    ``--option`` settings), or ``config.yaml`` on ``--resume`` with a new
    budget), the training, a progress line per episode, Ctrl-C keeping
    ``last.pt``. Writes ``config.yaml``, ``metrics.csv``, ``sl.pt`` (after
    the warm-up), ``best.pt`` (greedy, lowest avg JCT on the held-back
    seeds 100-104) and ``last.pt`` (``--resume``)."""
    name, config_cls = trainer_cls.checkpoints.kind, trainer_cls.checkpoints.config
    if backend != "local":
        raise ValueError(f"--backend {backend}: {name} trains in one process (backend local)")
    if workers > 1:
        log.print(f"{name}: one rollout process (--workers {workers} ignored)")
    out = Path(out)

    def settings(cfg: Any) -> None:
        if seeds:
            cfg.train_seeds = list(seeds)
        if configure is not None:
            configure(cfg)

    cfg = run_config(out, config_cls, resume=resume, minutes=minutes, steps=steps, default_minutes=15.0,
                     configure=settings, scenario=scenario, overrides=list(overrides), seed=seed)
    cfg.validate()
    trainer = trainer_cls(cfg, out, lambda s: log.print(s, markup=False, highlight=False),
                          init=str(init) if init else None, resume=resume)
    if not resume:
        write_config(out, cfg)
    label, key = trainer_cls.progress_field

    def progress(r: dict[str, Any]) -> None:
        v = r.get("valid_avg_jct_h", math.nan)
        log.print(f"episode {r['episode']:4d}  seed {r['seed']}  {label} {r[key]:6d}  "
                  f"return {r['return']:8.3f}  entropy {r['ent']:.3f}  "
                  + (f"valid JCT {v:.3f} h  " if v == v else "")
                  + f"best {r['best_valid_avg_jct_h']:.3f} h  [{r['wall_s'] / 60:.1f} min]", highlight=False)

    try:
        res = trainer.run(progress)
    except KeyboardInterrupt:
        trainer.save()
        log.print(f"interrupted: checkpoint kept in {out / 'last.pt'}; continue with --resume")
        return 130
    print(f"trained {res['episodes']} episodes, {res['steps']:,} inferences in {res['elapsed_s'] / 60:.1f} min; "
          f"held-back avg JCT {res['final_jct_s'] / 3600:.3f} h (best {res['best_jct_s'] / 3600:.3f} h, "
          f"{out / 'best.pt'})")
    return 0
