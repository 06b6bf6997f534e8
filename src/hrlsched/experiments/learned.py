"""The parts of the learned schedulers (``hrlsched.agent``) that the
experiments use: the agent's checkpoints and its level-1 candidate scorer,
and Harmony's checkpoint. The one module of ``hrlsched.experiments`` that
imports ``hrlsched.agent``, so that a move there is followed here only.
Needs torch (the ``rl`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrlsched.agent.checkpoint import CheckpointError, build_net, load, save
from hrlsched.agent.policy import CandidateScorer, HRLScheduler, shipped_checkpoint

__all__ = ["CandidateScorer", "CheckpointError", "HRLScheduler", "build_net", "harmony_allocation",
           "load", "save", "score_with", "shipped_checkpoint"]


def score_with(sched: HRLScheduler, scorer: Any) -> None:
    """Have ``sched`` score its level-1 candidates with ``scorer`` (an object
    with ``CandidateScorer``'s ``point`` and ``score``) instead of its own
    network's: how ``experiments.explain`` watches each choice."""
    sched._scorer = scorer


def harmony_allocation(checkpoint: str | Path | None) -> str:
    """The allocation policy that gives Harmony's jobs their workers and PSs
    (the one its checkpoint was trained with)."""
    from hrlsched.agent import harmony

    return str(harmony.load_checkpoint(checkpoint or harmony.shipped_checkpoint())["config"]["allocation"])
