"""The budgeted training loop of the learned schedulers' trainers (the hrl
agent's PPO iterations, DL2's and Harmony's actor-critic episodes).

After the warm-up, a greedy evaluation on the held-back seeds (100-104;
``best.pt``; the training curve's first point), then steps (an iteration
or an episode: ``step(frac)``, frac the share of the budget spent) until
the budget (minutes of wall time over resumed runs, or steps) is spent; a
greedy evaluation every ``eval_every_min`` (keeping ``best.pt``) and at
the end; a row of ``metrics.csv`` per step; ``last.pt`` every
``checkpoint_every_min`` and at the end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from hrlsched.agent.common.logger import CSVLogger


class BudgetedTrainer(Protocol):
    cfg: Any  # minutes, steps (the budget), eval_every_min, checkpoint_every_min
    elapsed_s: float  # training wall time, summed over resumed runs
    best_jct_s: float  # math.inf before the first evaluation
    log: Callable[[str], None]

    def evaluate(self) -> float:
        """The greedy policy's mean average JCT (s) on the held-back seeds."""
        ...

    def save(self, name: str = "last.pt") -> None: ...


def budget_fraction(elapsed_s: float, steps: int, minutes: float | None, max_steps: int | None) -> float:
    f = 0.0
    if minutes is not None:
        f = max(f, elapsed_s / max(minutes * 60.0, 1e-9))
    if max_steps:
        f = max(f, steps / max_steps)
    return f


def fmt_h(s: float) -> str:
    return "nan" if not math.isfinite(s) else f"{s / 3600:.3f} h"


def train_within_budget(trainer: BudgetedTrainer, step: Callable[[float], dict[str, Any]],
                        steps_done: Callable[[], int], metrics: CSVLogger, start_row: dict[str, Any],
                        progress: Callable[[dict[str, Any]], None] | None, start: float, base: float) -> float:
    """The loop; returns the final evaluation's avg JCT (s). ``steps_done``:
    the steps counted against ``cfg.steps``; ``start_row``: the first row of
    ``metrics.csv`` (its counters), written with the first evaluation;
    ``start``/``base``: the wall clock at the start of this call and the
    training time of earlier (resumed) calls."""
    cfg = trainer.cfg

    def keep_if_best(jct: float) -> None:
        if jct < trainer.best_jct_s:
            trainer.best_jct_s = jct
            trainer.save("best.pt")

    if trainer.best_jct_s == math.inf:
        trainer.elapsed_s = base + time.time() - start
        trainer.best_jct_s = trainer.evaluate()
        trainer.log(f"validation avg JCT before RL: {fmt_h(trainer.best_jct_s)}")
        trainer.save("best.pt")
        metrics.append({**start_row, "wall_s": round(trainer.elapsed_s, 1),
                        "valid_avg_jct_h": trainer.best_jct_s / 3600.0,
                        "best_valid_avg_jct_h": trainer.best_jct_s / 3600.0})
    last_eval = last_ckpt = time.time()
    while True:
        trainer.elapsed_s = base + time.time() - start
        frac = budget_fraction(trainer.elapsed_s, steps_done(), cfg.minutes, cfg.steps)
        if frac >= 1.0:
            break
        row = step(frac)
        row["wall_s"] = round(base + time.time() - start, 1)
        if time.time() - last_eval >= cfg.eval_every_min * 60:
            jct = trainer.evaluate()
            row["valid_avg_jct_h"] = jct / 3600.0
            keep_if_best(jct)
            last_eval = time.time()
        row["best_valid_avg_jct_h"] = trainer.best_jct_s / 3600.0
        metrics.append(row)
        if progress is not None:
            progress(row)
        if time.time() - last_ckpt >= cfg.checkpoint_every_min * 60:
            trainer.save()
            last_ckpt = time.time()
    jct = trainer.evaluate()
    keep_if_best(jct)
    trainer.elapsed_s = base + time.time() - start
    trainer.save()
    return jct
