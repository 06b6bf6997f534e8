"""Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies
for Deep Learning Workloads", OSDI'20).

Rules followed:
- Effective throughput: an allocation X[m, t] is the fraction of time job m
  runs on GPU type t (sum_t X[m, t] <= 1); the job's effective throughput is
  sum_t T[m, t] X[m, t], T[m, t] its throughput on type t at its scale factor
  (requested GPUs). Capacity: sum_m scale_m X[m, t] <= GPUs of type t.
- Policies as optimisation problems, solved as linear programmes with
  ``scipy.optimize.linprog`` (HiGHS):
  ``max_min_fairness`` (``gavel``): maximise min_m throughput(m, X) /
  throughput(m, X_equal), X_equal the time share of every type in proportion
  to its GPUs, 1/N of the cluster per job (Gavel's normalisation, Sec. 4.1);
  ``makespan`` (``gavel-makespan``, Gavel's "minimise total duration"):
  minimise max_m remaining_m / throughput(m, X), i.e. maximise
  min_m throughput(m, X) / remaining_m (both linear after the epigraph
  variable z).
- Round-based mechanism (Sec. 5): rounds of ``round_s`` (360 s, the
  ``time_per_iteration`` of Gavel's scheduler; at least the engine's round).
  At the start of a round, the allocation is recomputed if jobs arrived or
  finished since the last one; priority[m, t] = X[m, t] / (fraction of the
  rounds since the job arrived that it ran on type t) (infinite when it has
  not run there yet and X > 0); (job, type) pairs are served in priority
  order, a job on one type per round, while that type has GPUs for its scale
  factor; jobs on the same type as last round keep their GPUs. Inside a
  round the round's jobs run on: a job that arrives, or GPUs that a finished
  job leaves, wait for the next round.

Departures: T[m, t] is the predictor's speed of the job alone on GPUs of
type t packed on the fewest servers (per model and type: the backends read
``Topology.type_speed``, Gavel's own measurements where the model has a
counterpart there; the paper measures it, or estimates it
by matrix completion), and the makespan policy's remaining work the view's
prediction (both exact unless the scenario sets ``predictor``); space
sharing (co-location) is not considered; placement inside a type packs the
job on the fewest servers; a job larger than every GPU type is refused with
an error (Gavel runs a job on one type; it would never start). Each change
of a job's GPUs pays the engine's checkpoint-restart delay.
"""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Scheduler
from hrlsched.policies.placement.frame import gpus_in_server
from hrlsched.policies.placement.occupancy import Occupancy


def check_one_type(policy: str, view: ClusterView, types: np.ndarray, capacity: np.ndarray) -> None:
    """Gavel, AlloX and Gandiva-fair run a job on GPUs of one type: a job that
    asks for more GPUs than the largest type has could never run (it would
    wait until ``sim.max_time_s``), so it is refused with its name."""
    req = np.fromiter((j.requested_gpus for j in view.jobs), dtype=np.int64, count=len(view.jobs))
    bad = np.flatnonzero(req > capacity.max(initial=0))
    if bad.size:
        j = view.jobs[int(bad[0])]
        names = view.topology.gpu_type_names
        per = ", ".join(f"{names[int(t)]}: {int(c)}" for t, c in zip(types, capacity))
        raise ValueError(
            f"{policy}: job {j.job_id} ({j.name}) requests {j.requested_gpus} GPUs, more than any GPU type "
            f"of the cluster has ({per}); {policy} runs a job on GPUs of one type: cap the job's GPUs in "
            f"the workload, or give the cluster a larger group of one type"
        )


def solve_allocation(T: np.ndarray, scale: np.ndarray, capacity: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """X (jobs x types) maximising min_m sum_t T[m,t] X[m,t] / norm[m] under
    sum_t X[m,t] <= 1 and sum_m scale[m] X[m,t] <= capacity[t] (HiGHS LP)."""
    from scipy.optimize import linprog  # scipy only for runs that use Gavel

    n, k = T.shape
    nv = n * k + 1
    c = np.zeros(nv)
    c[-1] = -1.0  # maximise z
    rows, b = [], []
    for m in range(n):  # time: sum_t X[m, t] <= 1
        r = np.zeros(nv)
        r[m * k:(m + 1) * k] = 1.0
        rows.append(r)
        b.append(1.0)
    for t in range(k):  # capacity of each type
        r = np.zeros(nv)
        r[t:n * k:k] = scale
        rows.append(r)
        b.append(float(capacity[t]))
    for m in range(n):  # z <= throughput(m) / norm(m)
        r = np.zeros(nv)
        r[m * k:(m + 1) * k] = -T[m] / norm[m]
        r[-1] = 1.0
        rows.append(r)
        b.append(0.0)
    bounds = [(0.0, 1.0 if (scale[i // k] <= capacity[i % k] and T[i // k, i % k] > 0) else 0.0)
              for i in range(n * k)] + [(0.0, None)]
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(b), bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"gavel: the allocation LP failed: {res.message}")
    X = res.x[:-1].reshape(n, k)
    # Second stage: with the min fixed, use leftover capacity (Gavel's
    # water-filling spirit): maximise total normalised throughput.
    z = res.x[-1]
    c2 = np.concatenate([-(T / norm[:, None]).ravel(), [0.0]])
    A2 = np.array(rows)
    b2 = np.array(b)
    b2[-n:] = 0.0
    bounds2 = bounds[:-1] + [(z * (1 - 1e-7), None)]
    res2 = linprog(c2, A_ub=A2, b_ub=b2, bounds=bounds2, method="highs")
    if res2.status == 0:
        X = res2.x[:-1].reshape(n, k)
    return np.clip(X, 0.0, 1.0)


class Gavel(Scheduler):
    name = "gavel"
    event_driven = False

    def __init__(self, objective: str = "max_min_fairness", round_s: float = 360.0) -> None:
        if objective not in ("max_min_fairness", "makespan"):
            raise ValueError(f"gavel: objective must be 'max_min_fairness' or 'makespan', got {objective!r}")
        if not np.isfinite(round_s) or round_s <= 0:
            raise ValueError(f"gavel: round_s must be a positive number of seconds, got {round_s}")
        self.objective = objective
        self.reads_work = objective != "max_min_fairness"  # the makespan objective weighs remaining work
        self.round_s = float(round_s)
        if objective == "makespan":
            self.name = "gavel-makespan"

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.topo = topology
        self.types = np.unique(topology.gpu_type)
        self.capacity = np.array([np.count_nonzero(topology.gpu_type == t) for t in self.types], dtype=float)
        self.received: dict[int, np.ndarray] = {}  # rounds run on each type
        self.X: dict[int, np.ndarray] = {}
        self.ids: frozenset[int] = frozenset()
        self.next_round_s = -np.inf  # when Gavel's current round ends
        self.held: dict[int, Placement] = {}  # the placements of the current round

    def throughputs(self, view: ClusterView) -> np.ndarray:
        topo = self.topo
        T = np.zeros((len(view.jobs), len(self.types)))
        for ti, t in enumerate(self.types):
            gpus = np.flatnonzero(topo.gpu_type == t)
            for k, job in enumerate(view.jobs):
                r = job.requested_gpus
                if r > gpus.size:
                    continue
                g = gpus[:r]
                ps = topo.gpu_socket[g[: job.num_ps_requested]] if job.arch == "ps" else ()
                T[k, ti] = view.perf.alone_speed(job, Placement.of(g, ps), int(view.batch_sizes[k]))
        return T

    def allocation(self, view: ClusterView) -> np.ndarray:
        T = self.throughputs(view)
        n = len(view.jobs)
        scale = np.array([j.requested_gpus for j in view.jobs], dtype=float)
        if self.objective == "max_min_fairness":
            # 1/n of the cluster: time min(1, G / (n scale)) spread over types by capacity.
            G = self.capacity.sum()
            x_eq = np.minimum(1.0, G / (n * scale))[:, None] * (self.capacity / G)[None, :]
            norm = (T * x_eq).sum(axis=1)
        else:
            norm = np.maximum(view.remaining.astype(float), 1e-9)
        norm = np.where(norm > 0, norm, 1.0)
        return solve_allocation(T, scale, self.capacity, norm)

    def decide(self, view: ClusterView) -> Decision:
        ids = view.job_ids.tolist()
        if view.time_s + 1e-9 < self.next_round_s:
            # Inside one of Gavel's rounds: the round's jobs run on; arrivals,
            # and GPUs that a finished job left, wait for the next round.
            alive = set(ids)
            return Decision(placements={j: pl for j, pl in self.held.items() if j in alive})
        period = max(self.round_s, view.round_s)
        self.next_round_s = view.time_s + period
        idset = frozenset(ids)
        if idset != self.ids:
            check_one_type(self.name, view, self.types, self.capacity)
            X = self.allocation(view)
            self.X = {jid: X[k] for k, jid in enumerate(ids)}
            self.ids = idset
        k_types = len(self.types)
        rounds = np.maximum(np.floor(view.age_s() / period), 1.0)
        prio = np.zeros((len(ids), k_types))
        for k, jid in enumerate(ids):
            rec = self.received.setdefault(jid, np.zeros(k_types))
            frac = rec / rounds[k]
            x = self.X[jid]
            with np.errstate(divide="ignore", invalid="ignore"):
                prio[k] = np.where(x > 1e-9, np.where(frac > 0, x / frac, np.inf), -1.0)
        topo = self.topo
        occ = Occupancy(view)
        out = Decision()
        free_type = self.capacity.copy()
        pending = [(k, t) for k, t in zip(*np.unravel_index(np.argsort(-prio, axis=None, kind="stable"), prio.shape))
                   if prio[k, t] >= 0]
        chosen: dict[int, int] = {}
        for k, t in pending:
            k, t = int(k), int(t)
            if k in chosen or free_type[t] < view.jobs[k].requested_gpus:
                continue
            chosen[k] = t
            free_type[t] -= view.jobs[k].requested_gpus
        # Jobs staying on their type keep their GPUs.
        keep = [k for k, t in chosen.items() if view.placements[k] is not None
                and int(topo.gpu_type[view.placements[k].gpus[0]]) == int(self.types[t])]
        occ.commit_many([view.jobs[k] for k in keep], [view.placements[k] for k in keep])
        for k in keep:
            out.placements[ids[k]] = view.placements[k]
        for k, t in chosen.items():
            if k in keep:
                continue
            pl = place_on_type(occ, view, k, int(self.types[t]))
            if pl is not None:
                occ.commit(view.jobs[k], pl)
                out.placements[ids[k]] = pl
        for jid in ids:
            pl = out.placements.get(jid)
            if pl is not None:
                ti = int(np.searchsorted(self.types, topo.gpu_type[pl.gpus[0]]))
                self.received[jid][ti] += 1
        self.held = dict(out.placements)
        return out


def place_on_type(occ: Occupancy, view: ClusterView, k: int, gtype: int) -> Placement | None:
    """Job k's requested GPUs on GPUs of type ``gtype``: one server when one
    has room (the fullest that fits), else the servers with most room first."""
    topo = view.topology
    job = view.jobs[k]
    need = job.requested_gpus
    cap = occ.worker_capacity(job)
    of_type = np.bincount(topo.gpu_server, weights=topo.gpu_type == gtype, minlength=topo.n_servers) > 0
    servers = np.flatnonzero(of_type & (cap > 0))
    fit = servers[cap[servers] >= need]
    order = [int(fit[np.argmin(cap[fit])])] if fit.size else [int(s) for s in servers[np.argsort(-cap[servers])]]
    gpus: list[np.ndarray] = []
    left = need
    for s in order:
        g = gpus_in_server(occ, s, int(min(cap[s], left)))
        gpus.append(g)
        left -= g.size
        if left <= 0:
            break
    if left > 0:
        return None
    gs = np.concatenate(gpus)
    ps = occ.ps_sockets_for(job, job.num_ps_requested, gs) if job.arch == "ps" else ()
    if ps is None:
        return None
    pl = Placement.of(gs, ps)
    return pl if occ.fits(job, pl) else None
