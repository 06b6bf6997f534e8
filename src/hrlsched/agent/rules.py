"""The agent's rules as a heuristic of their own: ``optimus-tuned``.

The shipped ``hrl`` agent scores each job's menu slots with a learned scorer
plus two hand-set rules (``HintConfig.gap``, ``HintConfig.bonus``); with the
scorer silenced, those rules alone give the same figures (``hrlsched
evaluate``'s rules-only row). This scheduler is those rules without any
network, so that every comparison has them as a heuristic, named for what
they are:

- the hint: Optimus (Peng et al., EuroSys'18) with the tuned options of
  ``HintConfig`` (by default the shipped agent's, ``policies.hint.SHIPPED``:
  gains relative to the remaining time, a keep threshold, worker counts on
  the menu, the first workers shortest-remaining-first, each job's
  remaining work read from the scenario's predictor, exact unless
  ``predictor.work_noise`` is set: an oracle then);
- the greedy rule: each job, decided one after another at a decision point
  (``DecisionPoint``: arrivals, completions and every ``recheck_s``), takes
  the slot of the hint plus ``bonus``, unless at the hint's worker count
  another architecture, mode or PS count is predicted to progress faster by
  enough: the score of a slot is ``bonus`` x (it is the hint's) +
  ``GAP_SCALE`` x ``gap`` x (its predicted speed over the hint slot's, for
  the slots with the hint's worker count);
- ``pack`` places each job as it is decided;
- Pollux's batch rule (``HintConfig.batch``, shipped ``goodput``;
  ``policies.goodput_batch``): the point is decided with every job at its
  own batch size, the hint pricing each worker count at its batch of best
  goodput, then each job placed anew gets the batch of best goodput at its
  servers and GPUs, and a kept job where that pays for its restart, where
  the performance model has gradient statistics (the Pollux traces);
  elsewhere nothing changes (``tune``: the batches without the pricing).

Given the same ``HintConfig`` and menu, its decisions are the rules-only
ablation's of the agent, to the bit (a test runs both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision, Scheduler
from hrlsched.envs import features as F
from hrlsched.envs.base import heuristics
from hrlsched.envs.candidates import KEEP, WORKER_OPTIONS
from hrlsched.envs.decision import DecisionPoint
from hrlsched.policies.goodput_batch import GoodputBatch, with_batch_rule
from hrlsched.policies.hint import SHIPPED, TUNED, HintConfig

GAP_SCALE = 10.0  # the hint-gap weight is in these units (speed gaps are of order 0.1)
_WORKERS = F.CANDIDATE_FEATURES.index("workers")


class Choice(NamedTuple):
    """One job's allocation choice at a point: its id, the valid menu slots,
    the slot taken, and what the agent's scorer reads of it: the candidate
    rows of the valid slots (``features.CANDIDATE_FEATURES``) and the
    cluster row (``features.CLUSTER_FEATURES``)."""

    job_id: int
    valid: np.ndarray
    slot: int
    rows: np.ndarray | None = None
    cluster: np.ndarray | None = None


def add_rules(score: np.ndarray, dyn: np.ndarray, base: np.ndarray, ix: np.ndarray, gap: float,
              bonus: float) -> np.ndarray:
    """``score`` (one per valid slot ``ix``) plus the two rules: ``gap``
    (already in speed units: ``GAP_SCALE`` x the weight) x the slot's
    predicted speed over the hint slot's where it has the hint's worker
    count, and ``bonus`` x (the slot is the hint's). ``dyn``, ``base``:
    ``DecisionPoint.allocation_rows``' (``features.DYN_COLUMNS``: speed over
    the request first, ``is_hint`` last). The agent's scorer adds them the
    same way."""
    hr = int(dyn[:, 4].argmax())  # the hint's row
    return add_rules_to(score, dyn[:, 0], hr if dyn[hr, 4] > 0 else -1, base[:, _WORKERS], ix, gap, bonus)


def rules_scores(speed: np.ndarray, hint: int, workers: np.ndarray, ix: np.ndarray, gap: float,
                 bonus: float) -> np.ndarray:
    """The rules alone on ``DecisionPoint.rule_rows``: what the rules and a silenced scorer
    decide on. ``add_rules_to`` on zeros (the same scores, a zero's sign aside), with no sum
    over the zeros and the bonus added to the hint's row alone (per choice: fewer array
    operations)."""
    if gap and hint >= 0 and ix[hint] > KEEP:
        score = gap * ((speed - speed[hint]) * (workers == workers[hint]))
    else:
        score = np.zeros(len(ix), dtype=speed.dtype)
    if bonus and hint >= 0:
        score[hint] += bonus
    return score


def add_rules_to(score: np.ndarray, speed: np.ndarray, hint: int, workers: np.ndarray, ix: np.ndarray, gap: float,
                 bonus: float) -> np.ndarray:
    """``add_rules`` on what they read (``DecisionPoint.rule_rows``): the valid slots' speed over
    the request (float32), the hint's row (-1: none) and the slots' worker counts."""
    if gap and hint >= 0 and ix[hint] > KEEP:  # else a zero gap (as ``nets.hint_speed_gap``)
        score = score + gap * ((speed - speed[hint]) * (workers == workers[hint]))
    if bonus and hint >= 0:
        is_hint = np.zeros(len(ix), dtype=speed.dtype)
        is_hint[hint] = 1.0
        score = score + bonus * is_hint
    return score


def agent_point(topology: Topology, hint: HintConfig | None, *, allocates: bool = True, places: bool = False,
                placement: str = "pack", allocation: str = "optimus",
                worker_options: Sequence[int] = WORKER_OPTIONS, ps_options: Sequence[str] | None = None,
                max_jobs: int = 64) -> DecisionPoint:
    """The decision point an agent (or its rules) decides on in a run, as in
    training: its heuristics by name, its hint, and jobs beyond ``max_jobs``
    waiting, with at least one slot per GPU so that a larger cluster than
    the training one is not starved by the training padding."""
    made = heuristics(agent_allocates=allocates, placement=placement, allocation=allocation, hint=hint,
                      worker_options=worker_options)
    return DecisionPoint(topology, agent_allocates=allocates, agent_places=places, **made._asdict(),
                         max_jobs=max(int(max_jobs), topology.n_gpus), worker_options=worker_options,
                         **({"ps_options": ps_options} if ps_options is not None else {}), hint_config=hint)


def rules_name(placement: str = "pack") -> str:
    """``optimus-tuned``, with its placement named where it is not pack's
    (``optimus-tuned+migrate``): the registry's name of the rules so placed."""
    return "optimus-tuned" if placement == "pack" else f"optimus-tuned+{placement}"


class RulesScheduler(Scheduler):
    """``optimus-tuned``: see the module's docstring. ``hint``: the hint and
    rule weights (default the shipped agent's); ``worker_options``: the
    menu; ``max_jobs``: jobs decided at a point at most (at least one per
    GPU), the rest wait, as the agent's."""

    name = "optimus-tuned"
    decision_points = "events"

    def __init__(self, hint: HintConfig = SHIPPED, worker_options: Sequence[int] = WORKER_OPTIONS,
                 max_jobs: int = 64, placement: str = "pack") -> None:
        if hint.policy is None:
            raise ValueError("optimus-tuned: hint.policy: expected the hint heuristic the rules follow, got none")
        self.hint, self.worker_options, self.max_jobs, self.placement = hint, list(worker_options), max_jobs, placement
        self.name = rules_name(placement)
        self.reads_work = hint.remaining_from == "view"
        self.gap = GAP_SCALE * hint.gap
        self.bonus = hint.bonus or 0.0
        self.dp: DecisionPoint | None = None
        self.batch = GoodputBatch() if hint.batch in TUNED else None  # Pollux's batch rule (``hint.batch``)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.dp = agent_point(topology, self.hint, placement=self.placement, worker_options=self.worker_options,
                              max_jobs=self.max_jobs)
        self.dp.reset(rng)
        if self.batch is not None:
            self.batch.reset(topology)

    def decide(self, view: ClusterView) -> Decision:
        return self.decide_with(view)

    def decide_with(self, view: ClusterView, force: Mapping[int, int] | None = None,
                    trace: list[Choice] | None = None) -> Decision:
        """``decide``, except that a job of ``force`` (job id -> menu slot)
        takes that slot where it is valid at its turn (the jobs after it
        then follow the rules on what is left); ``trace`` gets each choice
        made (a lookahead reads them to make its alternatives)."""
        return with_batch_rule(self.batch, view, lambda v: self._decide_with(v, force, trace))

    def _decide_with(self, view: ClusterView, force: Mapping[int, int] | None,
                     trace: list[Choice] | None) -> Decision:
        dp = self.dp
        assert dp is not None, "optimus-tuned: reset() first"
        more = dp.begin(view)
        while more:
            jid = dp.view.jobs[dp.k].job_id  # type: ignore[union-attr]
            a = force.get(jid, -1) if force else -1
            if trace is None:  # only what the rules read
                speed, hint, workers, ix = dp.rule_rows()
                if a < 0 or a not in ix:
                    a = int(ix[rules_scores(speed, hint, workers, ix, self.gap, self.bonus).argmax()])  # first best
            else:
                _, cluster, _, base, dyn, ix = dp.allocation_rows()
                if a < 0 or a not in ix:
                    score = add_rules(np.zeros(len(ix), dtype=dyn.dtype), dyn, base, ix, self.gap, self.bonus)
                    a = int(ix[score.argmax()])
                rows = np.array(base, dtype=np.float64)
                rows[:, F.DYN_COLUMNS] = dyn
                trace.append(Choice(jid, ix.copy(), a, rows, np.array(cluster, dtype=np.float64)))
            more = dp.act(a)
        return dp.decision()
