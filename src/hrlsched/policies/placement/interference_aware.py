"""Topology-aware placement: least predicted interference first.

For each job to place, a few candidate placements are built (consolidated
best fit, consolidated on each of the ``candidates`` emptiest servers, and
spread over the least-loaded servers); each is scored with the performance
model's prediction of the speeds of the job and of every running job, and
the candidate that keeps the most speed wins: the job's speed over its speed
alone at its best candidate, plus the speed its neighbours keep relative to
before. Only the candidates are evaluated, each with one vectorised
``PerformanceModel.speeds`` call. In the spirit of topology- and
interference-aware placement (Amaral et al., SC'17; Harmony, Bao et al.
ICDCS'19), not a reproduction of either.

Called job by job (``place_job``, as a ``DecisionPoint`` does, probing
candidates for its masks too), a job's neighbours are the running jobs of
the view where they run now; through ``place``, also the jobs placed before
it in the same decision."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Allocation
from hrlsched.policies.placement.balance import BalancePlacement
from hrlsched.policies.placement.frame import IncrementalPlacement, gpus_in_server
from hrlsched.policies.placement.occupancy import Occupancy
from hrlsched.policies.placement.pack import PackPlacement


class TopologyPlacement(IncrementalPlacement):
    name = "topology"

    def __init__(self, candidates: int = 3) -> None:
        self.candidates = candidates
        self._pack = PackPlacement()
        self._spread = BalancePlacement()
        self._placed: dict[int, Placement] | None = None  # placed earlier in this decision (``place``): neighbours too

    def place(self, view: ClusterView, allocations: dict[int, Allocation]) -> dict[int, Placement]:
        self._placed = {}
        try:
            return super().place(view, allocations)
        finally:
            self._placed = None

    def _candidates(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int,
                    made: tuple[Placement | None, Placement | None] | None = None) -> list[Placement]:
        """The job's candidates, deduplicated; ``made``: pack's and balance's placements of it on
        ``occ`` where the caller has them already (``agent.placement_choice``), not made again."""
        if made is None:
            made = (self._pack.place_job(view, occ, job, n_workers, n_ps),
                    self._spread.place_job(view, occ, job, n_workers, n_ps))
        cands = list(made)
        cap = occ.worker_capacity(job)
        fit = np.flatnonzero(cap >= n_workers)
        for s in fit[np.argsort(-cap[fit], kind="stable")][: self.candidates]:
            g = gpus_in_server(occ, int(s), n_workers)
            if g.size == n_workers:
                ps = occ.ps_sockets_for(job, n_ps, g)
                if ps is not None:
                    cands.append(Placement.of(g, ps))
        seen, out = set(), []
        for c in cands:
            if c is not None and c.canonical() not in seen:
                seen.add(c.canonical())
                out.append(c)
        return out

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        cands = self._candidates(view, occ, job, n_workers, n_ps)
        if len(cands) <= 1:
            return cands[0] if cands else None
        others = [(j, p) for j, p in zip(view.jobs, view.placements) if p is not None and j.job_id != job.job_id]
        if self._placed is not None:
            others += [(view.jobs[view.index(jid)], p) for jid, p in self._placed.items()]
        oj = [j for j, _ in others]
        op = [p for _, p in others]
        base = view.perf.speeds(oj, op) if oj else np.zeros(0)
        best, best_score = None, -np.inf
        top = max(view.perf.alone_speed(job, c) for c in cands)
        for c in cands:
            sp = view.perf.speeds([*oj, job], [*op, c])
            kept = float(np.sum(sp[:-1] / base)) - len(oj) if oj else 0.0
            score = sp[-1] / top + kept
            if score > best_score:
                best, best_score = c, score
        if self._placed is not None:
            self._placed[job.job_id] = best
        return best
