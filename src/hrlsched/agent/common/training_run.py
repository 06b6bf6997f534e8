"""A training run: the settings every trainer has (``RunConfig``: what it
trains on, its seeds, its budget, how often it evaluates and keeps a
checkpoint) and its directory, where a new run starts empty and
``--resume`` continues the run whose ``config.yaml`` is there, read back
with its settings checked against the config's fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hrlsched.agent.common.seeds import DEFAULT_TRAIN_SEEDS, DEFAULT_VALID_SEEDS, check_seeds


@dataclass
class RunConfig:
    """The settings of every training run; a trainer's config adds its own
    (and may set other defaults)."""

    scenario: str = "default"
    overrides: list[str] = field(default_factory=list)
    train_seeds: list[int] = field(default_factory=lambda: list(DEFAULT_TRAIN_SEEDS))
    valid_seeds: list[int] = field(default_factory=lambda: list(DEFAULT_VALID_SEEDS))
    seed: int = 0  # of the trainer's random streams (sampling, shuffling, the initial weights)
    minutes: float | None = 15.0  # budget in wall time, summed over resumed runs
    steps: int | None = None  # budget in the trainer's steps (environment steps, inferences)
    eval_every_min: float = 3.0  # greedy evaluations on the held-back seeds (best.pt)
    checkpoint_every_min: float = 3.0  # last.pt

    def validate(self) -> None:
        check_seeds(self.train_seeds, self.valid_seeds)
        if self.minutes is None and self.steps is None:
            raise ValueError("expected a budget: minutes or steps")
        check_fields(self, ("eval_every_min", "checkpoint_every_min"), lambda v: v >= 0, "a value >= 0")


def check_fields(cfg: Any, names: Sequence[str], ok: Callable[[Any], bool], expected: str) -> None:
    """``ValueError`` naming the first of the settings ``names`` whose value
    is not ``ok``, and what was ``expected``."""
    for name in names:
        v = getattr(cfg, name)
        if not ok(v):
            raise ValueError(f"{name}: expected {expected}, got {v!r}")


def prepare_out(out: Path, resume: bool) -> None:
    if resume:
        if not (out / "config.yaml").is_file():
            raise ValueError(f"--resume: {out / 'config.yaml'} does not exist; start without --resume")
    elif out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out}: not empty; use --resume to continue the run there, or another directory")


def run_config(out: Path, cls: type, *, resume: bool, minutes: float | None, steps: int | None,
               default_minutes: float, configure: Callable[[Any], None] | None = None, **settings: Any) -> Any:
    """The config of the training run in ``out``: on ``resume``, its
    ``config.yaml`` with the budget given now (``minutes``, ``steps``; none:
    the run's); else a new ``cls(**settings)`` with that budget
    (``default_minutes`` when neither is given), then ``configure(cfg)``
    (the ``--option`` settings). A resume without ``config.yaml``, or a new
    run in a folder that is not empty, is refused."""
    prepare_out(out, resume)
    if resume:
        cfg = read_config(out, cls)
        if minutes is not None:
            cfg.minutes = minutes
        if steps is not None:
            cfg.steps = steps
        return cfg
    cfg = cls(minutes=minutes if minutes is not None else (None if steps is not None else default_minutes),
              steps=steps, **settings)
    if configure is not None:
        configure(cfg)
    return cfg


def write_config(out: Path, cfg: Any) -> None:
    import yaml

    from hrlsched.io import write_text

    write_text(out / "config.yaml", yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False))


def read_config(out: Path, cls: type) -> Any:
    """``out/config.yaml`` as a ``cls`` (a dataclass with defaults): unknown
    settings and values of another type than the default's are named."""
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
