"""Gandiva-fair (Chaudhary et al., "Balancing Efficiency and Fairness in
Heterogeneous GPU Clusters for Deep Learning", EuroSys'20).

Rules followed:
- Tickets: every user holds ``tickets`` (equal by default); a user's tickets
  are split equally across its active jobs.
- Split, gang-aware stride scheduling: each job has a pass value that grows
  by GPUs x round / tickets while it runs; every round the jobs with the
  lowest pass run (each with all its requested GPUs), until the GPUs are
  used, so every user receives GPU time in proportion to its tickets and,
  inside a user, its jobs share it equally. A job that keeps its turn keeps
  its GPUs.
- Heterogeneity, automated trading: with several GPU types, each user's
  speed-up of the fastest type over the slowest is the mean over its jobs of
  their speed ratio; the user with the highest speed-up buys fast-GPU share
  from the user with the lowest, paying slow-GPU share at the price
  (r_high + r_low) / 2 slow GPUs per fast GPU (both gain: the seller gets more
  than its own ratio, the buyer pays less than its own). Each type is then
  stride-scheduled on its own with the traded shares as tickets.

Departures: the stride quantum is the engine's round, and every job swapped
in pays the engine's checkpoint-restart delay (Gandiva's GPU suspend-resume
is much cheaper), so short rounds cost it many restarts; speed ratios are
the predictor's speeds alone (per model and type, ``Topology.type_speed``;
the paper profiles jobs); only the fastest and the slowest type (by the
type's ratio, ``Topology.gpu_speed``) are traded, one trade (best buyer, worst seller) per
re-computation, recomputed when the set of jobs changes; a job larger than
every GPU type is refused with an error.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Scheduler
from hrlsched.policies.gavel import check_one_type, place_on_type
from hrlsched.policies.placement.occupancy import Occupancy


def trade(ratio: dict[str, float], fast: dict[str, float], slow: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """One trade of fast-GPU share for slow-GPU share between the users with
    the highest and the lowest speed-up; returns the new (fast, slow) shares."""
    fast, slow = dict(fast), dict(slow)
    if len(ratio) < 2:
        return fast, slow
    buyer = max(ratio, key=lambda u: ratio[u])
    seller = min(ratio, key=lambda u: ratio[u])
    if ratio[buyer] <= ratio[seller] + 1e-9:
        return fast, slow
    price = (ratio[buyer] + ratio[seller]) / 2  # slow GPUs per fast GPU
    amount = min(fast[seller], slow[buyer] / price)
    fast[seller] -= amount
    fast[buyer] += amount
    slow[buyer] -= amount * price
    slow[seller] += amount * price
    return fast, slow


class GandivaFair(Scheduler):
    name = "gandiva-fair"
    event_driven = False

    def __init__(self, tickets: dict[str, float] | None = None) -> None:
        self.tickets = dict(tickets or {})
        bad = {u: t for u, t in self.tickets.items() if not (isinstance(t, (int, float)) and np.isfinite(t) and t > 0)}
        if bad:
            raise ValueError(f"gandiva-fair: tickets must be positive numbers per user, got {bad}")

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.topo = topology
        self.types = np.unique(topology.gpu_type)
        self.capacity = np.array([np.count_nonzero(topology.gpu_type == t) for t in self.types], dtype=float)
        self.passes: dict[int, float] = {}
        self.ids: frozenset[int] = frozenset()
        self.share: dict[str, np.ndarray] = {}  # user -> GPUs of each type

    def _shares(self, view: ClusterView) -> None:
        users = sorted({j.user for j in view.jobs})
        t = np.array([self.tickets.get(u, 1.0) for u in users])
        frac = t / t.sum()
        self.share = {u: f * self.capacity for u, f in zip(users, frac)}
        if len(self.types) < 2:
            return
        topo = self.topo
        fast_t = int(np.argmax([topo.gpu_speed[topo.gpu_type == ty].mean() for ty in self.types]))
        slow_t = int(np.argmin([topo.gpu_speed[topo.gpu_type == ty].mean() for ty in self.types]))
        ratios: dict[str, list[float]] = defaultdict(list)
        for k, job in enumerate(view.jobs):
            sp = []
            for ti in (fast_t, slow_t):
                g = np.flatnonzero(topo.gpu_type == self.types[ti])[: job.requested_gpus]
                if g.size < job.requested_gpus:
                    break
                ps = topo.gpu_socket[g[: job.num_ps_requested]] if job.arch == "ps" else ()
                sp.append(view.perf.alone_speed(job, Placement.of(g, ps), int(view.batch_sizes[k])))
            if len(sp) == 2 and sp[1] > 0:
                ratios[job.user].append(sp[0] / sp[1])
        ratio = {u: float(np.mean(v)) for u, v in ratios.items()}
        fast = {u: float(self.share[u][fast_t]) for u in ratio}
        slow = {u: float(self.share[u][slow_t]) for u in ratio}
        fast, slow = trade(ratio, fast, slow)
        for u in ratio:
            self.share[u][fast_t] = fast[u]
            self.share[u][slow_t] = slow[u]

    def decide(self, view: ClusterView) -> Decision:
        ids = view.job_ids.tolist()
        if frozenset(ids) != self.ids:
            check_one_type(self.name, view, self.types, self.capacity)
            self._shares(view)
            self.ids = frozenset(ids)
            # A new job starts at the smallest pass of its peers (no credit for the past).
            floor = min((self.passes[j] for j in ids if j in self.passes), default=0.0)
            for j in ids:
                self.passes.setdefault(j, floor)
        per_user: dict[str, int] = defaultdict(int)
        for j in view.jobs:
            per_user[j.user] += 1
        topo = self.topo
        occ = Occupancy(view)
        out: dict[int, Placement] = {}
        ran: list[int] = []
        # Fastest type first: the jobs with the lowest pass get the fastest GPUs they have share of.
        speed = [float(topo.gpu_speed[topo.gpu_type == ty].mean()) for ty in self.types]
        for ti in np.argsort(speed)[::-1]:
            ti = int(ti)
            ty = self.types[ti]
            # Tickets of each job on this type: its user's share of the type, split over its jobs.
            tick = np.array([self.share.get(j.user, np.zeros(len(self.types)))[ti] / per_user[j.user]
                             for j in view.jobs])
            cand = [k for k in range(len(ids)) if tick[k] > 1e-12 and ids[k] not in out]
            cand.sort(key=lambda k: (self.passes[ids[k]], view.jobs[k].arrival_s))
            free = int(self.capacity[ti])
            chosen = []
            for k in cand:
                if view.jobs[k].requested_gpus <= free:
                    chosen.append(k)
                    free -= view.jobs[k].requested_gpus
            keep = [k for k in chosen if view.placements[k] is not None
                    and int(topo.gpu_type[view.placements[k].gpus[0]]) == int(ty)]
            occ.commit_many([view.jobs[k] for k in keep], [view.placements[k] for k in keep])
            for k in keep:
                out[ids[k]] = view.placements[k]
            for k in chosen:
                if k in keep:
                    continue
                pl = place_on_type(occ, view, k, int(ty))
                if pl is not None:
                    occ.commit(view.jobs[k], pl)
                    out[ids[k]] = pl
            for k in chosen:
                if ids[k] in out:
                    ran.append(k)
                    self.passes[ids[k]] += view.jobs[k].requested_gpus * view.round_s / max(tick[k], 1e-12)
        return Decision(placements=out)
