"""Themis (Mahajan et al., "Themis: Fair and Efficient GPU Cluster
Scheduling", NSDI'20).

Rules followed:
- Finish-time fairness: rho = T_sh / T_id, T_sh the job's finish time (since
  arrival) if it kept an allocation, T_id its finish time alone with a 1/N
  share of the cluster (N active jobs): rho > 1 means worse than a fair share.
- Leases: GPUs are granted for a lease (``lease_s``, 10 min); only GPUs that
  are free or whose lease expired are offered each round.
- Partial-allocation auction: the fraction 1 - f of the jobs with the worst
  rho bid for the offered GPUs. A bid is the job's valuation of every bundle
  of g more GPUs, v(g) = rho(current) / rho(current + g). The auction picks
  the bundles maximising the product of the valuations (Nash social welfare,
  an exact dynamic programme over jobs x GPUs); each winner then gets only
  the fraction c_i = prod_{j != i} v_j(g_j) / prod_{j != i} v_j(g_j^{-i}) of
  its bundle (g^{-i}: the optimum without i), the hidden payment that makes
  truthful bids a best response.
- Leftover GPUs (not won, or withheld by partial allocation) go to the other
  jobs, worst rho first, up to their request (work conservation).

Departures: the agents' remaining-work estimates are the view's predicted
remaining work and speeds at g GPUs the predictor's speed alone on g GPUs
packed on the fewest servers (both exact unless the scenario sets
``predictor``; the paper asks the job's hyper-parameter tuner and profiles);
bundles are GPU counts, placed by ``pack`` afterwards, not
placement-specific bundles; withheld fractions are rounded down to whole GPUs.
"""

from __future__ import annotations

import math

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy


def nash_allocation(values: list[np.ndarray], supply: int) -> tuple[list[int], float]:
    """Bundles g_i (0 <= g_i < len(values[i])) with sum <= supply maximising
    sum_i log values[i][g_i] (values[i][0] = 1: nothing won). Exact DP."""
    n = len(values)
    best = np.zeros(supply + 1)  # best log-welfare using at most s GPUs
    choice = np.zeros((n, supply + 1), dtype=np.int64)
    s_ = np.arange(supply + 1)
    for i, v in enumerate(values):
        m = min(len(v) - 1, supply)
        logv = np.log(np.maximum(np.asarray(v, dtype=float)[: m + 1], 1e-300))
        # cand[g, s]: job i wins g GPUs, the jobs before it share the other s - g.
        rest = s_[None, :] - np.arange(m + 1)[:, None]
        cand = np.where(rest >= 0, best[np.maximum(rest, 0)] + logv[:, None], -np.inf)
        top = cand.max(axis=0)
        # The smallest bundle within 1e-12 of the best (ties go to fewer GPUs).
        choice[i] = np.argmax(cand >= top[None, :] - 1e-12, axis=0)
        best = top
    out = [0] * n
    s = supply
    for i in range(n - 1, -1, -1):
        out[i] = int(choice[i, s])
        s -= out[i]
    return out, float(best[supply])


class Themis(AllocationPolicy):
    name = "themis"
    reads_work = True  # (ClusterView.remaining: see contract.Scheduler)
    event_driven = False
    default_placement = "pack"

    def __init__(self, f: float = 0.8, lease_s: float = 600.0) -> None:
        if not 0.0 <= f < 1.0:
            raise ValueError(f"themis: f must be in [0, 1), got {f}")
        if not math.isfinite(lease_s) or lease_s <= 0:
            raise ValueError(f"themis: lease_s must be a positive number of seconds, got {lease_s}")
        self.f = float(f)
        self.lease_s = float(lease_s)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.lease: dict[int, tuple[int, float]] = {}  # job -> (GPUs, lease end)
        self._speed: dict[tuple, np.ndarray] = {}  # (job, arch, mode, PSs, batch) -> speed alone at 0, 1, ... GPUs

    def speeds(self, view: ClusterView, k: int, upto: int) -> np.ndarray:
        """Job k's predicted speed alone at 0..upto GPUs (0 at none), kept
        per job and batch and extended on demand, so that a round reads them
        as one array."""
        job, b = view.jobs[k], int(view.batch_sizes[k])
        key = (job.job_id, job.arch, job.mode, job.num_ps_requested, b)
        tab = self._speed.get(key, np.zeros(1))
        if tab.size <= upto:
            more = [view.perf.isolated_speed(job, g, job.num_ps_requested, b) for g in range(tab.size, upto + 1)]
            tab = self._speed[key] = np.concatenate([tab, more])
        return tab

    def rho(self, view: ClusterView, k: int, gpus: np.ndarray, age_s: float | None = None) -> np.ndarray:
        """Finish-time fairness of job k at each GPU count in ``gpus``."""
        job = view.jobs[k]
        g = np.asarray(gpus, dtype=np.int64)
        sp = self.speeds(view, k, max(int(g.max(initial=0)), job.requested_gpus))
        share = min(1.0, view.topology.n_gpus / (len(view.jobs) * job.requested_gpus))
        work = float(view.progress[k] + view.remaining[k])
        t_id = work / (sp[job.requested_gpus] * share)
        age = float(view.age_s()[k]) if age_s is None else float(age_s)
        with np.errstate(divide="ignore"):
            t_sh = age + float(view.remaining[k]) / sp[np.maximum(g, 0)]
        return np.where(g > 0, t_sh / t_id, 1e12)  # never finishes without GPUs: worst

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        n = len(view.jobs)
        ids = view.job_ids.tolist()
        now = view.time_s
        self.lease = {j: v for j, v in self.lease.items() if j in set(ids)}
        held = np.zeros(n, dtype=np.int64)
        for k, jid in enumerate(ids):
            g, end = self.lease.get(jid, (0, now))
            if end > now + 1e-9:
                held[k] = g
        supply = int(view.topology.n_gpus - held.sum())
        req = np.array([j.requested_gpus for j in view.jobs], dtype=np.int64)
        age = view.age_s()
        rho_now = np.array([self.rho(view, k, held[k:k + 1], age[k])[0] for k in range(n)])
        worst = np.argsort(-rho_now, kind="stable")
        n_bid = max(1, math.ceil((1.0 - self.f) * n)) if n else 0
        bidders = [int(k) for k in worst[:n_bid] if held[k] < req[k]]
        grant = np.zeros(n, dtype=np.int64)
        if bidders and supply > 0:
            vals = []
            for k in bidders:
                extra = np.arange(0, int(req[k] - held[k]) + 1)
                r = self.rho(view, k, held[k] + extra, age[k])
                vals.append(r[0] / r)
            win, _ = nash_allocation(vals, supply)
            logv = [float(np.log(v[g])) for v, g in zip(vals, win)]
            for i, k in enumerate(bidders):
                if win[i] == 0:
                    continue
                others = vals[:i] + vals[i + 1:]
                without, _ = nash_allocation(others, supply)
                with_i = sum(lv for m, lv in enumerate(logv) if m != i)
                wo = sum(float(np.log(v[g])) for v, g in zip(others, without))
                c = math.exp(with_i - wo) if np.isfinite(wo) else 1.0
                grant[k] = int(math.floor(min(c, 1.0) * win[i] + 1e-9))
        left = supply - int(grant.sum())
        # Leftovers: every job not yet at its request, worst rho first.
        for k in worst:
            if left <= 0:
                break
            want = int(req[k] - held[k] - grant[k])
            if want > 0:
                g = min(want, left)
                grant[k] += g
                left -= g
        out: dict[int, Allocation] = {}
        for k in worst:
            total = int(held[k] + grant[k])
            jid = ids[int(k)]
            if total <= 0:
                self.lease.pop(jid, None)
                continue
            if grant[k] > 0 or jid not in self.lease or self.lease[jid][1] <= now + 1e-9:
                self.lease[jid] = (total, now + self.lease_s)
            out[jid] = Allocation(total, view.jobs[int(k)].num_ps_requested)
        return out
