"""The workload seeds of training: which seeds a training run may see.

Seeds 0-99 are the evaluation seeds of every reported figure: a trainer,
its validation and a search (``hrlsched tune``) never see them."""

from __future__ import annotations

from collections.abc import Sequence

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
        raise ValueError("train_seeds: expected at least one training seed (>= 1000)")

