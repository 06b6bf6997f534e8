"""Pieces shared by the RL schedulers of the literature rebuilt here (DL2,
``agent/dl2.py``; Harmony, ``agent/harmony.py``): their training runs'
directory, seeds and budget rules, an experience-replay buffer, small MLPs
evaluated in numpy inside the engine, and their checkpoints.

Checkpoints are written whole (``agent.checkpoint.save``: temporary file,
then rename) and carry a ``kind`` (``dl2``, ``harmony``) and the names of
the features their network reads; loading one of another kind or feature
list is refused with the difference named.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.checkpoint import CheckpointError

EVAL_SEEDS = range(0, 100)  # the seeds of every reported figure: never trained or validated on
DEFAULT_TRAIN_SEEDS = list(range(1000, 1064))
DEFAULT_VALID_SEEDS = [100, 101, 102, 103, 104]


def check_seeds(train: Sequence[int], valid: Sequence[int]) -> None:
    bad = sorted({int(s) for s in [*train, *valid] if int(s) in EVAL_SEEDS})
    if bad:
        raise ValueError(f"seeds {bad[:5]}{'...' if len(bad) > 5 else ''}: seeds 0-99 are the evaluation "
                         "seeds of every reported figure; training and validation must not see them "
                         "(use seeds >= 1000)")
    if not train:
        raise ValueError("seeds: expected at least one training seed (>= 1000)")


def prepare_out(out: Path, resume: bool) -> None:
    if resume:
        if not (out / "config.yaml").is_file():
            raise ValueError(f"--resume: {out / 'config.yaml'} does not exist; start without --resume")
    elif out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out}: not empty; use --resume to continue the run there, or another directory")


def write_config(out: Path, cfg: Any) -> None:
    import yaml

    from hrlsched.io import write_text

    write_text(out / "config.yaml", yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False))


def read_config(out: Path, cls: type) -> Any:
    import yaml

    raw = yaml.safe_load((out / "config.yaml").read_text()) or {}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ValueError(f"{out / 'config.yaml'}: unknown settings {unknown}")
    defaults = cls()
    for k, v in raw.items():  # a hand-edited value of the wrong type is named, not failed on later
        d = getattr(defaults, k)
        if isinstance(d, float) and isinstance(v, int) and not isinstance(v, bool):
            raw[k] = float(v)
        elif d is not None and v is not None and not isinstance(v, type(d)) and not (
                isinstance(d, float) and v is None):
            raise ValueError(f"{out / 'config.yaml'}: {k}: expected a value like {d!r}, got {v!r}")
    return cls(**raw)


def budget_fraction(elapsed_s: float, steps: int, minutes: float | None, max_steps: int | None) -> float:
    f = 0.0
    if minutes is not None:
        f = max(f, elapsed_s / max(minutes * 60.0, 1e-9))
    if max_steps:
        f = max(f, steps / max_steps)
    return f


# ------------------------------------------------------------------ replay
class ReplayBuffer:
    """The most recent ``capacity`` samples (first in, first out), drawn
    uniformly in minibatches. A sample is a row of each named array."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.data: dict[str, np.ndarray] = {}
        self.size = 0
        self.pos = 0

    def add(self, **rows: np.ndarray) -> None:
        n = len(next(iter(rows.values())))
        if n == 0:
            return
        if not self.data:
            self.data = {k: np.zeros((self.capacity, *np.asarray(v).shape[1:]), dtype=np.asarray(v).dtype)
                         for k, v in rows.items()}
        if n >= self.capacity:  # only the newest fit
            rows = {k: np.asarray(v)[-self.capacity:] for k, v in rows.items()}
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        for k, v in rows.items():
            self.data[k][idx] = v
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, size=min(int(n), self.size))
        return {k: v[idx] for k, v in self.data.items()}


# -------------------------------------------------------------------- MLPs
def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Fully connected layers with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class NumpyMLP:
    """A frozen copy of an ``mlp`` evaluated in numpy: one decision inside the
    engine is a few small matrix products, far below torch's per-call cost."""

    def __init__(self, net: nn.Sequential) -> None:
        self.layers = [(m.weight.detach().numpy().T.astype(np.float32).copy(),
                        m.bias.detach().numpy().astype(np.float32).copy())
                       for m in net if isinstance(m, nn.Linear)]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, dtype=np.float32)
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < last:
                np.maximum(h, 0.0, out=h)
        return h


def masked_logits(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """-inf on the masked actions, before any softmax (DL2's code masked the
    probabilities after it)."""
    return np.where(mask, logits, -np.inf)


def masked_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    z = masked_logits(logits, mask)
    z = z - z.max()
    p = np.exp(z)
    return p / p.sum()


def sample_masked(logits: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
    z = masked_logits(logits, mask)
    z = z - z.max()
    p = np.exp(z)
    p /= p.sum()
    return int(rng.choice(p.size, p=p))


# -------------------------------------------------------------- checkpoints


def save(path: str | Path, kind: str, payload: dict[str, Any]) -> None:
    ckpt.save(path, {"kind": kind, **payload})


def load(path: str | Path, kind: str, features: dict[str, list[str]]) -> dict[str, Any]:
    """A checkpoint of ``kind`` whose feature lists equal ``features``
    (``CheckpointError`` naming what differs otherwise)."""
    path = Path(path)
    ck = ckpt.read(path)
    if ck.get("kind") != kind:
        raise CheckpointError(f"{path}: a checkpoint of {ck.get('kind') or 'the hrl agent'!s}, not of {kind}")
    saved = ck.get("features") or {}
    for name, now in features.items():
        was = list(saved.get(name, []))
        if was != list(now):
            gone = [x for x in was if x not in now]
            new = [x for x in now if x not in was]
            raise CheckpointError(f"{path}: trained on other {name} features than this version's"
                                  + (f"; only in the checkpoint: {gone}" if gone else "")
                                  + (f"; only here: {new}" if new else "")
                                  + ("; same names in another order" if not gone and not new else ""))
    return ck


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state()}


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch"])


def half_state(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weights stored as float16 (the shipped checkpoints: half the bytes; a
    float32 network loads them back with an error far below its noise)."""
    return {k: v.detach().to(torch.float16).clone() for k, v in sd.items()}


def float_state(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.float() for k, v in sd.items()}


def discounted(r: np.ndarray, gamma: float | np.ndarray) -> np.ndarray:
    """Discounted returns to go; ``gamma`` a scalar or one factor per step."""
    g = np.broadcast_to(np.asarray(gamma, dtype=np.float64), r.shape)
    out = np.zeros(r.size, dtype=np.float64)
    acc = 0.0
    for t in range(r.size - 1, -1, -1):
        acc = float(r[t]) + float(g[t]) * acc
        out[t] = acc
    return out


def fmt_h(s: float) -> str:
    return "nan" if not math.isfinite(s) else f"{s / 3600:.3f} h"


def append_csv(path: Path, row: dict[str, Any], fields: Sequence[str]) -> None:
    """One row of ``metrics.csv`` (header written with the first row)."""
    import csv

    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields), extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in fields})


def actor_critic_loop(trainer: Any, evaluate: Callable[[], float], fields: Sequence[str],
                      progress: Callable[[dict[str, Any]], None] | None, start: float, base: float) -> dict[str, Any]:
    """DL2's and Harmony's training after their warm-ups: episodes
    (``trainer.episode(frac)``, frac the share of the budget spent) until the
    budget is spent, a greedy evaluation on the held-back seeds every
    ``eval_every_min`` (keeping ``best.pt``) and at the end, a row of
    ``metrics.csv`` per episode, ``last.pt`` every ``checkpoint_every_min``.
    ``start``/``base``: the wall clock at the start of this call and the
    training time of earlier (resumed) calls."""
    cfg = trainer.cfg

    def keep_if_best(jct: float) -> None:
        if jct < trainer.best_jct_s:
            trainer.best_jct_s = jct
            trainer.save("best.pt")

    if trainer.best_jct_s == math.inf:
        trainer.best_jct_s = evaluate()
        trainer.log(f"validation avg JCT before RL: {fmt_h(trainer.best_jct_s)}")
        trainer.save("best.pt")
    last_eval = last_ckpt = time.time()
    while True:
        trainer.elapsed_s = base + time.time() - start
        frac = budget_fraction(trainer.elapsed_s, trainer.steps, cfg.minutes, cfg.steps)
        if frac >= 1.0:
            break
        row = trainer.episode(frac)
        row["wall_s"] = round(base + time.time() - start, 1)
        if time.time() - last_eval >= cfg.eval_every_min * 60:
            jct = evaluate()
            row["valid_avg_jct_h"] = jct / 3600.0
            keep_if_best(jct)
            last_eval = time.time()
        row["best_valid_avg_jct_h"] = trainer.best_jct_s / 3600.0
        append_csv(trainer.out / "metrics.csv", row, fields)
        if progress is not None:
            progress(row)
        if time.time() - last_ckpt >= cfg.checkpoint_every_min * 60:
            trainer.save()
            last_ckpt = time.time()
    jct = evaluate()
    keep_if_best(jct)
    trainer.elapsed_s = base + time.time() - start
    trainer.save()
    return {"episodes": trainer.episodes, "steps": trainer.steps, "final_jct_s": jct,
            "best_jct_s": trainer.best_jct_s, "elapsed_s": trainer.elapsed_s}


def export(dst: str | Path, kind: str, checkpoint: dict[str, Any], keys: Sequence[str] = ()) -> None:
    """A training checkpoint's weights alone, in float16, with its config,
    progress and the entries ``keys``: what is shipped, written to ``dst``."""
    keep = {k: checkpoint[k] for k in ("config", "features", "episodes", "steps", "elapsed_s", "best_jct_s", *keys)}
    save(dst, kind, {**keep, "state_dict": half_state(checkpoint["state_dict"])})


def train_command(name: str, config_cls: type, trainer_cls: type, progress_field: tuple[str, str], *,
                  scenario: str, out: Path, minutes: float | None, steps: int | None, workers: int,
                  seeds: list[int] | None, overrides: list[str], resume: bool, seed: int, init: Path | None,
                  backend: str, log: Any, configure: Callable[[Any], None] | None = None) -> int:
    """``hrlsched train --agent NAME`` for DL2 and Harmony: the run's
    directory and config (a new one, with ``configure`` applied to it (the
    ``--option`` settings), or ``config.yaml`` on ``--resume`` with a new
    budget), the training, a progress line per episode
    (``progress_field``: label and key of the agent's own count), Ctrl-C
    keeping ``last.pt``."""
    if backend != "local":
        raise ValueError(f"--backend {backend}: {name} trains in one process (backend local)")
    if workers > 1:
        log.print(f"{name}: one rollout process (--workers {workers} ignored)")
    out = Path(out)
    prepare_out(out, resume)
    if resume:
        cfg = read_config(out, config_cls)
        if minutes is not None:
            cfg.minutes = minutes
        if steps is not None:
            cfg.steps = steps
    else:
        cfg = config_cls(scenario=scenario, overrides=list(overrides), seed=seed,
                         minutes=minutes if minutes is not None else (None if steps is not None else 15.0),
                         steps=steps)
        if seeds:
            cfg.train_seeds = list(seeds)
        if configure is not None:
            configure(cfg)
    cfg.validate()
    trainer = trainer_cls(cfg, out, lambda s: log.print(s, markup=False, highlight=False),
                          init=str(init) if init else None, resume=resume)
    if not resume:
        write_config(out, cfg)
    label, key = progress_field

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
