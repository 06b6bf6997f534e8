"""The agent's learned point selector: at a decision point, the agent's own
decision or another heuristic's whole decision, by a linear score of a few
features of the point.

Why: on ``default`` and ``comm`` the lookahead's most frequent gain over the
rules is another policy's whole decision at a point (``optimus+pack``'s most
often, ``docs/headroom.md``): a choice across jobs, which a per-job residual
(``agent.residual``) cannot express. Here each heuristic of
``SELECTOR_POLICIES`` scores ``w_p . f(point)``; the agent takes the best
one's decision where that score is above 0, its own otherwise. With all
weights 0 no heuristic is ever taken: the agent to the bit.

The point's features (``SELECTOR_FEATURES``), each within [0, 1] or so:
``bias`` (1); ``free_gpus``: the share of GPUs with no worker;
``queued``: the share of the active jobs not running; ``demand``: the GPUs
the active jobs request over the cluster's, over 4 (capped at 1);
``new``: the share of the active jobs that never ran (arrivals since);
``idle``: the share of GPUs the agent's own decision leaves without a
worker; ``moves``: the share of the active jobs whose placement its own
decision changes (started, stopped or moved: each a restart);
``arrived``: the GPUs requested by the active jobs that arrived within the
last hour (``ARRIVED_WINDOW_S``), over the cluster's (capped at 1).
``idle`` and ``moves`` read the agent's own decision, computed first anyway: the
guess was that what that decision does (GPUs left idle, jobs restarted)
tells where another heuristic's decision pays, which the first five do not;
alone they found no weights that pay (``docs/agent.md``); with ``recent``
they carry small weights in the shipped checkpoint. ``recent`` is the selector's own memory:
a count of the points where it took a heuristic, halved at each point. Why:
along the lookahead's run, which has taken better decisions already,
another heuristic's decision beats the rules' at few points
(``docs/headroom.md``): whether one pays may depend on what was taken
just before.
``arrived`` is how much is still coming. Why (the guess it was added on):
the rules without their keep threshold grow running jobs onto idle GPUs,
and where jobs keep arriving the arrivals soon want those GPUs back, before
the growth repays its restart; step 14's selector lost on ``pollux-w6`` by
taking them early in the trace, and gained on ``default`` and ``comm``
mostly at points after the last arrival (``docs/agent.md``, item 10). An
hour is tens of rounds, about what a grown job needs to repay a restart.
Its ablation (``train-es --drop-feature arrived``, the same draws) did as
well on the held-back seeds: it is not what fixed that slip.
``optimus-tuned+migrate/f=0`` is the agent's rules (placed by ``migrate``)
without their keep threshold: a running job grows whenever the hint's
allocation gives it more. Why: along the rules' own run, the lookahead's
alternatives pay most where the cluster drains (``docs/headroom.md``): the
threshold keeps jobs below their request on GPUs left idle, while it pays
where the cluster is full (restarts cost).
A checkpoint that names fewer features or policies (made before some were
added) loads with the missing ones weighted 0: the same choices.

The agent always makes its own decision first (its decision point keeps
its state), and a heuristic decides only where it is taken; the heuristics
of ``SELECTOR_POLICIES`` keep no state between points. A checkpoint carries
the weights as ``selector = {"policies": [...], "features": [...],
"weights": [[...], ...]}``; ``hrlsched train-es --learn selector`` learns
them (``agent.es``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, Scheduler
from hrlsched.errors import CheckpointError

#: the heuristics it may take; the last is the agent's rules without their keep threshold (``hint.keep_frac``)
SELECTOR_POLICIES = ("optimus+pack", "srtf+pack", "drf+pack", "optimus-tuned+migrate/f=0")
POINT_FEATURES = ("bias", "free_gpus", "queued", "demand", "new", "idle", "moves", "arrived")  # of the point
#: the point's, and ``recent``: the selector's own recent choices
SELECTOR_FEATURES = (*POINT_FEATURES, "recent")
RECENT_DECAY = 0.5  # ``recent`` halves at each point, and gains 1 where a heuristic was taken
ARRIVED_WINDOW_S = 3600.0  # ``arrived`` counts the jobs that arrived this recently


def arrived_share(view: ClusterView, req: np.ndarray | None = None) -> float:
    """``arrived`` at this point: the GPUs requested by the active jobs that
    arrived within ``ARRIVED_WINDOW_S`` over the cluster's, capped at 1
    (``req``: the jobs' requested GPUs, where already made)."""
    if req is None:
        req = np.fromiter((j.requested_gpus for j in view.jobs), dtype=float, count=len(view.jobs))
    return min(float(req[view.age_s() <= ARRIVED_WINDOW_S].sum()) / max(view.gpu_tasks.size, 1), 1.0)


def point_features(view: ClusterView, own: Decision) -> np.ndarray:
    """``POINT_FEATURES`` of a decision point, where the agent's own
    decision is ``own``."""
    n = max(len(view.jobs), 1)
    gpus = max(view.gpu_tasks.size, 1)
    running = view.running
    req = np.fromiter((j.requested_gpus for j in view.jobs), dtype=float, count=len(view.jobs))
    demand = float(req.sum()) / gpus
    never = float(np.count_nonzero((view.running_s <= 0) & ~running)) if len(view.jobs) else 0.0
    used = sum(len(p.gpus) for p in own.placements.values())
    # started, stopped or moved (None != a placement)
    moves = sum(own.placements.get(j.job_id) != p for j, p in zip(view.jobs, view.placements))
    return np.array([1.0, float(np.count_nonzero(view.gpu_tasks == 0)) / gpus,
                     float(len(view.jobs) - np.count_nonzero(running)) / n, min(demand / 4.0, 1.0), never / n,
                     max(0.0, 1.0 - used / gpus), moves / n, arrived_share(view, req)])


class Selector:
    """The heuristics of ``SELECTOR_POLICIES`` and the weights that choose
    among them and the agent's own decision."""

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = np.asarray(weights, dtype=np.float64).reshape(len(SELECTOR_POLICIES), len(SELECTOR_FEATURES))
        self._policies: list[Scheduler] = []
        self.taken = np.zeros(len(SELECTOR_POLICIES), dtype=np.int64)  # points each heuristic decided
        self.points = 0
        self.recent = 0.0  # the ``recent`` feature: a decaying count of the points a heuristic decided

    def reset(self, topology: Topology) -> None:
        from hrlsched.policies.registry import make_scheduler

        self._policies = [make_scheduler(p) for p in SELECTOR_POLICIES]
        for s in self._policies:
            s.reset(topology, np.random.default_rng(0))
        self.taken[:] = 0
        self.points = 0
        self.recent = 0.0

    def choose(self, view: ClusterView, own: Decision) -> int:
        """The heuristic taken at this point (its index), or -1: the agent's own."""
        self.points += 1
        if not self.weights.any():
            return -1
        s = self.weights.dot(np.append(point_features(view, own), self.recent))
        i = int(s.argmax())
        i = i if s[i] > 0.0 else -1
        self.recent = RECENT_DECAY * self.recent + (1.0 if i >= 0 else 0.0)
        return i

    def decide(self, view: ClusterView, own: Decision, pricing: Any = None) -> Decision:
        """``own``, or the chosen heuristic's decision at this point (with
        the agent's own ``recheck_s`` where the heuristic sets none).
        ``pricing``: the agent's decision point's (``envs.pricing.Pricing``), whose figures of
        this point's jobs a heuristic that decides on a decision point of its own (the rules)
        reads instead of pricing them again: the same values, half the work at a burst."""
        i = self.choose(view, own)
        if i < 0:
            return own
        self.taken[i] += 1
        pol = self._policies[i]
        if pricing is not None and getattr(pol, "dp", None) is not None:
            pol.dp.pricing.share(pricing)  # type: ignore[attr-defined]
        d = pol.decide(view)
        if d.recheck_s is None and own.recheck_s is not None:
            d = dataclasses.replace(d, recheck_s=own.recheck_s)
        return d


def selector_weights(ck: dict[str, Any], source: str = "checkpoint") -> np.ndarray | None:
    """The selector's weights of a loaded checkpoint, (policies, features)
    (None: it has none); ``CheckpointError`` if its policies or features are
    not this version's."""
    r = ck.get("selector")
    if r is None:
        return None
    names = list(r.get("features", []))
    pols = list(r.get("policies", []))
    if not pols or len(set(pols)) != len(pols) or any(p not in SELECTOR_POLICIES for p in pols) \
            or not names or len(set(names)) != len(names) or any(f not in SELECTOR_FEATURES for f in names):
        raise CheckpointError(f"{source}: its selector's policies {r.get('policies')} and features {r.get('features')} "
                              f"are not some of this version's {list(SELECTOR_POLICIES)} and {list(SELECTOR_FEATURES)}")
    shape = (len(pols), len(names))
    try:
        w = np.asarray(r.get("weights", []), dtype=np.float64)
    except (TypeError, ValueError):
        w = np.zeros(0)
    if w.shape != shape or not np.all(np.isfinite(w)):
        raise CheckpointError(f"{source}: selector weights: expected {shape[0]} rows of {shape[1]} finite numbers")
    out = np.zeros((len(SELECTOR_POLICIES), len(SELECTOR_FEATURES)))
    # a policy or a feature the file lacks: weight 0 (never taken; not read)
    out[np.ix_([SELECTOR_POLICIES.index(p) for p in pols], [SELECTOR_FEATURES.index(f) for f in names])] = w
    return out


def with_selector(ck: dict[str, Any], weights: np.ndarray | None) -> dict[str, Any]:
    """``ck`` with these selector weights (None: without a selector)."""
    out = {k: v for k, v in ck.items() if k != "selector"}
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).reshape(len(SELECTOR_POLICIES), len(SELECTOR_FEATURES))
        out["selector"] = {"policies": list(SELECTOR_POLICIES), "features": list(SELECTOR_FEATURES),
                           "weights": [[float(x) for x in row] for row in w]}
    return out
