"""Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI'21).

Rules followed (paper Sec. 3-4):
- Goodput: a job's goodput at an allocation is the best, over global batch
  sizes (split into a per-GPU batch and gradient-accumulation steps), of
  throughput x statistical efficiency; efficiency follows the gradient noise
  scale, gain = (var + sqr) / (var / s + sqr) initial-batch steps per step at
  s = batch / initial batch (``perf.goodput``). The batch size (and the
  accumulation) of a job is re-tuned to every new allocation.
- Speedup of a job = goodput at the allocation / goodput at its fair share
  (ceil(GPUs / jobs) GPUs); a job that has not run yet has speedup r / fair
  (no profile) and may get one GPU; afterwards at most twice the most GPUs it
  has run on (the exploration rule of the artifact), at most 64, at most
  max batch / min local batch.
- Cluster-wide search: an evolutionary search over allocation matrices (jobs x
  servers, GPUs of each job on each server), maximising the p-power mean of
  the speedups (p = -1 by default: fairness-leaning). Each round starts from
  the previous round's population (carried over to the jobs still present)
  and the current allocation; operators: single-point crossover over jobs,
  mutation (reset a job to its current allocation, zero entries, grow
  entries), repair.
- Re-allocation penalty: the speedup of a job whose allocation changes is
  multiplied by max(age - restarts x delay, 0) / (age + delay), delay the
  restart delay (30 s).
- Interference avoidance: repair keeps at most one distributed job (on more
  than one server) per server; it also caps each job at its maximum GPUs and
  each server at its GPUs, in priority order (least attained service, then
  arrival).
- Placement: the chosen matrix gives GPUs per server per job; a job whose
  matrix row is unchanged keeps its GPUs (no restart).

Where it departs from the paper (and the artifact, petuum/adaptdl branch
osdi21-artifact, ``simulator/pollux.py``):
- Throughput is the predictor's (the simulator's own model unless the
  scenario sets ``predictor``), not a throughput model fitted online to the
  job's observed step times: with the measured backend,
  the measured step time of an even spread of the GPUs over the servers
  (the fitted model of the artifact also sees only (servers, GPUs)); other
  backends: the job alone on an even spread, at its own batch size
  (efficiency 1, no batch tuning: those backends model no gradient noise).
- The gradient statistics are those of the job at its current batch and epoch
  (what Pollux's agent measures), read from the measured traces.
- Single objective with elitist truncation selection and binary tournaments
  instead of NSGA-II over (speedup mean, utility): the artifact selects the
  best-mean solution of the Pareto front anyway. Population and generations
  default to the artifact's 100 x 100; the registered ``pollux`` runs 50 x
  up to 30 and stops a round's search once the best has not improved for 8
  generations (``patience``): the population carries over between rounds, so
  the search goes on across rounds.
- The fair-share baseline runs on the fewest servers that hold it (the
  artifact's fitted model evaluates one server with more GPUs than it has,
  which measured tables cannot answer).
- Batch sizes are re-tuned at re-allocations only, not at every epoch (our
  engine restarts a job whose batch changes).
- Jobs of applications listed in ``FIXED`` keep the artifact's fixed batch
  and one GPU (ncf).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.goodput import PolluxApplication, canonical_rotation
from hrlsched.policies.base import Scheduler
from hrlsched.policies.placement.occupancy import Occupancy

# Applications the artifact runs at a fixed (batch, GPUs): ncf does not scale.
FIXED: dict[str, tuple[int, int]] = {"ncf": (32768, 1)}


def even_split(n_nodes: int, n_gpus: int) -> tuple[int, ...]:
    """``n_gpus`` over ``n_nodes`` servers as evenly as they go (largest first)."""
    q, r = divmod(n_gpus, n_nodes)
    return tuple([q + 1] * r + [q] * (n_nodes - r))


def step_times(app: PolluxApplication, placement: tuple[int, ...], local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``app.get_throughput`` at many local batches of one placement at once
    (same rules; NaN where nothing measured is near), so the search does not
    pay one interpolator call per candidate batch size."""
    by_pl, interp = getattr(app, "_by_placement", None), getattr(app, "_interp", None)
    if by_pl is None or interp is None:  # another layout of PolluxApplication: one call each
        out = []
        for x in local:
            try:
                out.append(app.get_throughput(placement, float(x)))
            except ValueError:
                out.append((np.nan, np.nan))
        arr = np.asarray(out, dtype=float).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]
    pl = canonical_rotation(placement)
    st = np.full(local.size, np.nan)
    sy = np.full(local.size, np.nan)
    hit = by_pl.get("".join(map(str, pl)))
    inside = np.zeros(local.size, dtype=bool)
    if hit is not None:
        xs, ys = hit
        inside = (local >= xs[0] - 1e-9) & (local <= xs[-1] + 1e-9)
        st[inside] = np.interp(local[inside], xs, ys[:, 0])
        sy[inside] = np.interp(local[inside], xs, ys[:, 1])
    rest = ~inside
    if rest.any():
        pts = np.column_stack([np.full(rest.sum(), min(len(pl), 16)), np.full(rest.sum(), sum(pl)), local[rest]])
        v = np.asarray(interp(pts), dtype=float)
        ok = np.all(np.isfinite(v), axis=1)
        st[np.flatnonzero(rest)[ok]] = v[ok, 0]
        sy[np.flatnonzero(rest)[ok]] = v[ok, 1]
    return st, sy


class MeasuredGoodput:
    """Per-application throughput of candidate batch sizes at (servers, GPUs),
    from the measured step times (cached per process)."""

    def __init__(self, app: PolluxApplication, per_server: int, n_batches: int = 24) -> None:
        self.app = app
        self.per_server = per_server
        self.n_batches = n_batches
        self._cache: dict[tuple[int, int, int | None], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def candidates(self, nodes: int, gpus: int, fixed: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(requested batch, actual batch, seconds per step) of the valid candidates."""
        key = (nodes, gpus, fixed)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        app = self.app
        if fixed is not None:
            bs = np.array([fixed], dtype=float)
        else:
            lo = max(app.init_batch_size, app.min_local_bsz * gpus)
            bs = np.geomspace(lo, app.max_batch_size, self.n_batches) if lo <= app.max_batch_size else np.zeros(0)
        req, actual, step = [], [], []
        pl = even_split(nodes, gpus)
        if max(pl) <= self.per_server:
            rows = []
            for b in np.unique(np.round(bs).astype(int)):
                atomic, accum, act = app.batch_config(gpus, int(b))
                if app.min_local_bsz <= atomic <= app.max_local_bsz and act >= 1:
                    rows.append((int(b), atomic, accum, act))
            if rows:
                st, sync = step_times(app, pl, np.array([r[1] for r in rows], dtype=float))
                for (b, _, accum, act), t, y in zip(rows, st, sync):
                    if np.isfinite(t):  # else outside what was measured
                        req.append(b)
                        actual.append(act)
                        step.append(t + (t - y) * accum)
        out = (np.asarray(req, dtype=np.int64), np.asarray(actual, dtype=float), np.asarray(step, dtype=float))
        self._cache[key] = out
        return out


class Pollux(Scheduler):
    name = "pollux"
    event_driven = False

    def __init__(self, p: float = -1.0, population: int = 100, generations: int = 100,
                 restart_delay_s: float = 30.0, max_replicas: int = 64, max_nodes: int = 16,
                 patience: int = 0) -> None:
        if not p <= 1:
            raise ValueError(f"pollux: p must be <= 1 (a mean that favours fairness), got {p}")
        for what, v, lo in (("population", population, 2), ("generations", generations, 0),
                            ("max_replicas", max_replicas, 1), ("max_nodes", max_nodes, 1), ("patience", patience, 0)):
            if int(v) != v or v < lo:
                raise ValueError(f"pollux: {what} must be an integer >= {lo}, got {v}")
        if not math.isfinite(restart_delay_s) or restart_delay_s < 0:
            raise ValueError(f"pollux: restart_delay_s must be a non-negative number of seconds, got {restart_delay_s}")
        self.p = float(p)
        self.population = int(population)
        self.generations = int(generations)
        self.restart_delay_s = float(restart_delay_s)
        self.max_replicas_cap = int(max_replicas)
        self.max_nodes = int(max_nodes)
        self.patience = int(patience)

    # ------------------------------------------------------------------ state
    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.rng = rng
        self.topo = topology
        self.cap = topology.server_gpus.astype(np.int64)
        self.max_seen: dict[int, int] = {}  # most GPUs each job has run on
        self.prev_pop: np.ndarray | None = None
        self.prev_ids: list[int] = []
        self._tables: dict[str, MeasuredGoodput] = {}
        self._generic: dict[tuple, tuple[float, int]] = {}

    # --------------------------------------------------------------- goodput
    def _app(self, view: ClusterView, job: Job) -> PolluxApplication | None:
        return application(view, job)

    def _goodput_fn(self, view: ClusterView, k: int) -> tuple[Callable[[int, int], tuple[float, int]], int]:
        """goodput(nodes, gpus) -> (goodput, batch size) of active job k, and
        its largest useful GPU count."""
        job = view.jobs[k]
        app = self._app(view, job)
        if app is not None:
            return goodput_fn(view, k, app, self._tables, int(self.cap.max()))

        perf, topo = view.perf, self.topo
        cache = self._generic

        def fn_generic(nodes: int, gpus: int) -> tuple[float, int]:
            key = (job.model, job.arch, job.mode, job.batch_size, job.num_ps_requested, nodes, gpus)
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = _generic(nodes, gpus)
            return hit

        def _generic(nodes: int, gpus: int) -> tuple[float, int]:
            split = even_split(nodes, gpus)
            servers = np.argsort(-self.cap, kind="stable")[:nodes]
            if len(servers) < nodes or np.any(self.cap[servers] < np.asarray(split)):
                return 0.0, 0
            gs = np.concatenate([topo.server_first_gpu[s] + np.arange(c) for s, c in zip(servers, split)])
            ps = topo.gpu_socket[gs[: job.num_ps_requested]] if job.arch == "ps" else ()
            return perf.alone_speed(job, Placement.of(gs, ps)), job.batch_size

        return fn_generic, topo.n_gpus

    # ---------------------------------------------------------------- search
    def decide(self, view: ClusterView) -> Decision:
        J = len(view.jobs)
        if J == 0:
            return Decision()
        topo = self.topo
        N = topo.n_servers
        for k, pl in enumerate(view.placements):
            if pl is not None:
                jid = view.jobs[k].job_id
                self.max_seen[jid] = max(self.max_seen.get(jid, 0), pl.n_workers)
        order = np.lexsort((view.age_s() * -1.0, view.attained_gpu_s))  # least service, then oldest
        jobs = [view.jobs[int(k)] for k in order]
        ids = [j.job_id for j in jobs]

        base = np.zeros((J, N), dtype=np.int64)
        for r, k in enumerate(order):
            pl = view.placements[int(k)]
            if pl is not None:
                base[r] = np.bincount(topo.gpu_server[np.asarray(pl.gpus)], minlength=N)

        n_gpus = int(self.cap.sum())
        fair = max(1, math.ceil(n_gpus / J))
        fns: list[Callable[[int, int], tuple[float, int]]] = []
        maxr = np.zeros(J, dtype=np.int64)
        base_gp = np.zeros(J)
        profiled = np.zeros(J, dtype=bool)
        for r, k in enumerate(order):
            fn, limit = self._goodput_fn(view, int(k))
            fns.append(fn)
            seen = self.max_seen.get(ids[r], 0)
            profiled[r] = seen > 0
            maxr[r] = max(1, min(max(2 * seen, 1), self.max_replicas_cap, limit, n_gpus))
            if profiled[r]:
                f = min(fair, n_gpus)
                while f >= 1:
                    g = fn(math.ceil(f / int(self.cap.max())), f)[0]
                    if g > 0:
                        break
                    f -= 1
                base_gp[r] = g if f >= 1 else 0.0
                profiled[r] = base_gp[r] > 0
        R = int(maxr.max())
        sp = np.full((J, N + 1, R + 1), np.nan)
        sp[:, :, 0] = 0.0
        sp[:, 0, :] = 0.0
        batch_of: dict[tuple[int, int, int], int] = {}
        for r in np.flatnonzero(~profiled):
            sp[r, 1:, 1:] = np.arange(1, R + 1) / fair  # no profile yet: linear

        def lookup(nodes: np.ndarray, gpus: np.ndarray) -> np.ndarray:
            jj = np.broadcast_to(np.arange(J), nodes.shape)
            v = sp[jj, nodes, gpus]
            miss = np.isnan(v)
            if miss.any():
                for j, n, g in {(int(a), int(b), int(c)) for a, b, c in zip(jj[miss], nodes[miss], gpus[miss])}:
                    gp, b = fns[j](n, g) if n <= g <= n * int(self.cap.max()) else (0.0, 0)
                    sp[j, n, g] = gp / base_gp[j]
                    batch_of[j, n, g] = b
                v = sp[jj, nodes, gpus]
            return v

        age = view.age_s()[order]
        restarts = view.restarts[order].astype(float)
        d = self.restart_delay_s
        penalty = np.maximum(age - restarts * d, 0.0) / (age + d)
        penalty = np.where(base.sum(axis=1) > 0, penalty, 1.0)  # a waiting job loses nothing by starting

        def fitness(pop: np.ndarray) -> np.ndarray:
            nodes = np.count_nonzero(pop, axis=2)
            gpus = pop.sum(axis=2)
            s = lookup(nodes, gpus)
            changed = np.any(pop != base[None], axis=2)
            s = np.where(changed, s * penalty[None], s)
            return power_mean(s, self.p)

        pop = self._initial_population(ids, base)
        pop = self._repair(pop, maxr)
        fit = fitness(pop)
        P = self.population
        stale = 0
        for _ in range(self.generations):
            kids = self._offspring(pop, fit, base, P)
            kids = self._repair(kids, maxr)
            kfit = fitness(kids)
            allp = np.concatenate([pop, kids])
            allf = np.concatenate([fit, kfit])
            keep = np.argsort(-allf, kind="stable")[:P]
            improved = allf[keep[0]] > fit.max() * (1 + 1e-9)
            pop, fit = allp[keep], allf[keep]
            stale = 0 if improved else stale + 1
            if self.patience and stale >= self.patience:
                break  # the best has not improved for `patience` generations
        self.prev_pop, self.prev_ids = pop.copy(), ids
        best = pop[int(np.argmax(fit))]
        return self._to_decision(view, order, best, base, batch_of)

    def _initial_population(self, ids: list[int], base: np.ndarray) -> np.ndarray:
        P = self.population
        J, N = base.shape
        pop = np.broadcast_to(base, (P, J, N)).copy()
        if self.prev_pop is not None and self.prev_pop.shape[2] == N:
            where = {jid: r for r, jid in enumerate(self.prev_ids)}
            src = [where.get(jid, -1) for jid in ids]
            keep = np.array([s >= 0 for s in src])
            if keep.any():
                prev = self.prev_pop[:, [s for s in src if s >= 0]]
                m = min(P, prev.shape[0])
                pop[:m][:, keep] = prev[:m]
                pop[:m][:, ~keep] = 0
        pop[0] = base  # the current allocation is always a candidate
        return pop

    def _offspring(self, pop: np.ndarray, fit: np.ndarray, base: np.ndarray, n: int) -> np.ndarray:
        rng = self.rng
        P, J, N = pop.shape
        # Binary tournaments pick parents; single-point crossover over jobs.
        a, b = rng.integers(P, size=(2, n))
        p1 = np.where(fit[a] >= fit[b], a, b)
        a, b = rng.integers(P, size=(2, n))
        p2 = np.where(fit[a] >= fit[b], a, b)
        point = rng.integers(J + 1, size=n)
        take1 = np.arange(J)[None, :] < point[:, None]
        kids = np.where(take1[:, :, None], pop[p1], pop[p2])
        # Mutation: reset jobs to the current allocation, zero entries, grow entries.
        reset = rng.random((n, J)) < 0.1
        kids = np.where(reset[:, :, None], base[None], kids)
        zero = (rng.random((n, J)) < 0.1)[:, :, None] & (rng.random((n, J, N)) < 0.1)
        kids[zero] = 0
        used = kids.sum(axis=1)  # (n, N)
        free = self.cap[None] - used
        room = (free > 0)[:, None, :] | (kids > 0)
        p_grow = room / np.maximum(room.sum(axis=2, keepdims=True), 1)
        grow = rng.random(kids.shape) < p_grow
        hi = np.broadcast_to(self.cap[None, None, :], kids.shape)
        val = kids + (rng.random(kids.shape) * (hi - kids + 1)).astype(np.int64)
        kids = np.where(grow, np.minimum(val, hi), kids)
        return kids

    def _repair(self, pop: np.ndarray, maxr: np.ndarray) -> np.ndarray:
        rng = self.rng
        pop = pop.copy()
        # Interference avoidance: one distributed job per server (the first in priority order).
        dist = np.count_nonzero(pop, axis=2) > 1
        on = (pop > 0) & dist[:, :, None]
        pop[on & (np.cumsum(on, axis=1) > 1)] = 0
        # At most maxr GPUs and max_nodes servers per job, trimmed on servers
        # taken in random order (only the rows that exceed a limit).
        over = (pop.sum(axis=2) > maxr[None, :]) | (np.count_nonzero(pop, axis=2) > self.max_nodes)
        if over.any():
            sub = pop[over]
            lim = np.broadcast_to(maxr[None, :], over.shape)[over]
            shuffle = np.argsort(rng.random(sub.shape), axis=1)
            sh = np.take_along_axis(sub, shuffle, axis=1)
            sh = np.diff(np.minimum(np.cumsum(sh, axis=1), lim[:, None]), axis=1, prepend=0)
            sh = np.where(np.cumsum(sh > 0, axis=1) <= self.max_nodes, sh, 0)
            pop[over] = np.take_along_axis(sh, np.argsort(shuffle, axis=1), axis=1)
        # Server capacity, in priority order.
        pop = np.diff(np.minimum(np.cumsum(pop, axis=1), self.cap[None, None, :]), axis=1, prepend=0)
        return pop

    # ------------------------------------------------------------- placement
    def _to_decision(self, view: ClusterView, order: np.ndarray, best: np.ndarray, base: np.ndarray,
                     batch_of: dict[tuple[int, int, int], int]) -> Decision:
        occ = Occupancy(view)
        out = Decision()
        kept_jobs, kept_pls = [], []
        for r, k in enumerate(order):
            pl = view.placements[int(k)]
            if pl is not None and np.array_equal(best[r], base[r]):
                kept_jobs.append(view.jobs[int(k)])
                kept_pls.append(pl)
                out.placements[view.jobs[int(k)].job_id] = pl
        occ.commit_many(kept_jobs, kept_pls)
        for r, k in enumerate(order):
            job = view.jobs[int(k)]
            if job.job_id in out.placements or best[r].sum() == 0:
                continue
            old = view.placements[int(k)]
            gs = self._gpus_on(occ, best[r], old.gpus if old is not None else ())
            if gs.size < best[r].sum():
                continue
            ps = occ.ps_sockets_for(job, job.num_ps_requested, gs) \
                if job.arch == "ps" else ()
            if ps is None:
                continue
            pl = Placement.of(gs, ps)
            if not occ.fits(job, pl):
                continue
            occ.commit(job, pl)
            out.placements[job.job_id] = pl
            key = (r, int(np.count_nonzero(best[r])), int(best[r].sum()))
            b = batch_of.get(key, 0) or self._first_batch(view, job)
            if b > 0:
                out.batch_sizes[job.job_id] = b
        return out


    def _gpus_on(self, occ: Occupancy, row: np.ndarray, own: tuple[int, ...]) -> np.ndarray:
        """row[s] free GPUs on each server s, the job's own GPUs first, then
        the lowest index; servers in index order (fewer where a server lacks them)."""
        topo = self.topo
        g = np.flatnonzero((row[topo.gpu_server] > 0) & (occ.gpu_free > 0))
        srv = topo.gpu_server[g]
        g = g[np.lexsort((g, ~np.isin(g, own), srv))]
        srv = topo.gpu_server[g]
        rank = np.arange(g.size) - np.searchsorted(srv, srv, side="left")
        return g[rank < row[srv]]

    def _first_batch(self, view: ClusterView, job: Job) -> int:
        """Batch of a job with no profile yet: its application's initial batch
        (the artifact's rule on one GPU), or the fixed one."""
        app = self._app(view, job)
        if app is None:
            return 0
        fixed = FIXED.get(app.name)
        return fixed[0] if fixed else app.init_batch_size


def application(view: ClusterView, job: Job) -> PolluxApplication | None:
    """``job``'s Pollux application where the view's performance model has them (the measured
    backend), else None (no model of gradient noise: no batch to tune)."""
    app_of = getattr(view.perf, "app", None)
    return app_of(job) if callable(app_of) and hasattr(view.perf, "apps") else None


def goodput_fn(view: ClusterView, k: int, app: PolluxApplication, tables: dict[str, MeasuredGoodput],
               per_server: int) -> tuple[Callable[[int, int], tuple[float, int]], int]:
    """Pollux's goodput of active job ``k`` (of application ``app``) as a function of
    (servers, GPUs) -> (goodput, the batch size giving it), or at a given batch, from its gradient statistics at its
    current batch and epoch, and its largest useful GPU count; ``tables``: the measured
    step times per application, made here on first use (``per_server``: most GPUs a server has)."""
    table = tables.get(app.name)
    if table is None:
        table = tables[app.name] = MeasuredGoodput(app, per_server)
    fixed = FIXED.get(app.name)
    cur = int(view.batch_sizes[k])
    epoch = app.epoch_of(float(view.progress[k]) / app.init_batch_size)
    sqr, var = app.grad_stats(cur, epoch)
    init = app.init_batch_size
    limit = 1 if fixed else app.max_batch_size // app.min_local_bsz

    def fn(nodes: int, gpus: int, batch: int | None = None) -> tuple[float, int]:
        req, actual, step = table.candidates(nodes, gpus, fixed[0] if fixed else None)
        if req.size == 0:
            return 0.0, 0
        s = actual / init
        g = (var + sqr) / (var / s + sqr) / step
        if batch is not None:  # the goodput at this batch, where it is a candidate (else none)
            at = np.flatnonzero(req == batch)
            return (float(g[at[0]]), int(batch)) if at.size else (0.0, 0)
        b = int(np.argmax(g))
        return float(g[b]), int(req[b])

    return fn, limit


def power_mean(values: np.ndarray, p: float) -> np.ndarray:
    """p-power mean over the last axis of speedups (+1e-3 so that p < 0 stays finite)."""
    v = np.asarray(values, dtype=float) + 1e-3
    if p == 0:
        return np.exp(np.log(v).mean(axis=-1))
    return np.mean(v ** p, axis=-1) ** (1.0 / p)
