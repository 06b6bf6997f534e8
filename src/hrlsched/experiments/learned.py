"""The parts of the learned schedulers (``hrlsched.agent``, and the rivals
rebuilt from the literature, ``hrlsched.rivals``) that the experiments use:
the agent's checkpoints and its level-1 candidate scorer, DL2's decision
points and Harmony's checkpoint. The one module of ``hrlsched.experiments``
that imports them, so that a move there is followed here only. Needs torch
(the ``rl`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrlsched.agent.checkpoint import build_net, hint_of, load
from hrlsched.agent.common.checkpoint import save
from hrlsched.agent.common.shipped import checkpoint_path
from hrlsched.agent.common.shipped import shipped_checkpoint as shipped
from hrlsched.agent.policy import SHIPPED, CandidateScorer, HRLScheduler
from hrlsched.errors import CheckpointError

__all__ = ["CandidateScorer", "CheckpointError", "HRLScheduler", "build_net", "checkpoint_path", "dl2_against_drf",
           "harmony_allocation", "hint_of", "load", "save", "score_with", "shipped_checkpoint"]


def shipped_checkpoint(policy: str = "hrl") -> Path:
    """The checkpoint shipped in the package of the agent (``hrl``) or of a
    rival (``dl2``, ``harmony``)."""
    if policy == "hrl":
        return shipped(SHIPPED)
    from hrlsched.rivals import dl2, harmony

    kinds = {"dl2": dl2.CHECKPOINTS, "harmony": harmony.CHECKPOINTS}
    if policy not in kinds:
        raise ValueError(f"policy {policy!r}: expected a learned policy (hrl, dl2, harmony)")
    return shipped(kinds[policy].shipped)


def score_with(sched: HRLScheduler, scorer: Any) -> None:
    """Have ``sched`` score its level-1 candidates with ``scorer`` (an object
    with ``CandidateScorer``'s ``point``, ``score`` and ``silent``: whether it
    reads no encoding) instead of its own network's: how ``experiments.explain``
    watches each choice."""
    sched._scorer = scorer


def harmony_allocation(checkpoint: str | Path | None) -> str:
    """The allocation policy that gives Harmony's jobs their workers and PSs
    (the one its checkpoint was trained with)."""
    from hrlsched.rivals.harmony import CHECKPOINTS

    return str(CHECKPOINTS.load(checkpoint or shipped(CHECKPOINTS.shipped))["config"]["allocation"])


def dl2_against_drf(checkpoint: str | Path | None, window: int | None = None) -> tuple[Any, Any]:
    """A DL2 scheduler (``checkpoint``; None: the shipped one; ``window``:
    its job slots, None: the checkpoint's) and a function ``(view) -> (DL2's
    decision point once its network has chosen, DRF's allocations)`` that
    builds, in the same state, the allocations of DL2's network
    (``Point.allocations()``) and of its teacher (DRF's increments in DL2's
    action space, ``{job id: Allocation}``)."""
    from hrlsched.rivals import dl2

    sched = dl2.DL2Scheduler(checkpoint)
    if window is not None:
        sched.set_window(window)

    def point(view: Any, choose: Any) -> Any:
        pt = dl2.Point(view, sched.cfg, sched.cache, sched.profiles)
        while not pt.done:
            pt.act(choose(pt))
        return pt

    return sched, lambda view: (point(view, sched.choose), point(view, lambda pt: pt.drf_action()).allocations())
