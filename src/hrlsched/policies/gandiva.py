"""Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep
Learning", OSDI'18).

Rules followed:
- Jobs run at their requested GPUs, oldest first; running jobs keep their
  GPUs (no preemption of exclusive jobs).
- Packing, when it pays: when jobs wait and no exclusive GPUs are left, a
  waiting job is packed (time-sliced, two jobs per GPU: suspend-resume at GPU
  level, which our engine models as GPU sharing) onto the GPUs of a running
  job of the same size if the pair's predicted normalised throughput
  (speed / speed alone, summed) is at least ``pack_gain`` (1: no worse than
  taking turns).
- Introspection: every round the packed pairs' measured speeds (last round)
  are checked; if their normalised sum fell under ``unpack_below``, the later
  job is unpacked (suspended) again.
- Introspective migration: a job spread over several servers is migrated to
  one server that has become free enough to hold it (one migration per round:
  each costs a checkpoint-restart).
- Grow-shrink: when no job waits, a running job whose predicted speed at twice
  its request is at least ``grow_gain`` x its speed now grows to twice its
  request (one per round); grown jobs shrink back to their request as soon as
  a job waits.

Departures: time-slicing inside a GPU is the engine's GPU sharing (no explicit
round-robin slices, no suspend cost); packing decisions use the predictor's
speeds for the pair alone on those GPUs (Gandiva profiles them on line);
migration and grow-shrink pay the engine's checkpoint-restart delay.
"""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView, Decision
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Scheduler
from hrlsched.policies.placement.frame import gpus_in_server
from hrlsched.policies.placement.occupancy import Occupancy


def pack_placement(occ: Occupancy, view: ClusterView, job: Job, n: int) -> Placement | None:
    """``n`` GPUs for ``job`` on the fewest servers (best fit), its PSs near them."""
    cap = occ.worker_capacity(job)
    fit = np.flatnonzero(cap >= n)
    order = [int(fit[np.argmin(cap[fit])])] if fit.size else [int(s) for s in np.argsort(-cap, kind="stable")]
    parts, left = [], n
    for s in order:
        if cap[s] <= 0:
            break
        g = gpus_in_server(occ, s, int(min(cap[s], left)))
        parts.append(g)
        left -= g.size
        if left <= 0:
            break
    if left > 0:
        return None
    gs = np.concatenate(parts)
    ps = occ.ps_sockets_for(job, job.num_ps_requested, gs) if job.arch == "ps" else ()
    if ps is None:
        return None
    pl = Placement.of(gs, ps)
    return pl if occ.fits(job, pl) else None


class Gandiva(Scheduler):
    name = "gandiva"
    event_driven = False
    max_tasks_per_gpu = 2

    def __init__(self, pack_gain: float = 1.0, unpack_below: float = 0.95, grow_gain: float = 1.3) -> None:
        for what, v in (("pack_gain", pack_gain), ("unpack_below", unpack_below), ("grow_gain", grow_gain)):
            if not np.isfinite(v) or v <= 0:
                raise ValueError(f"gandiva: {what} must be a positive ratio of normalised throughputs, got {v}")
        if unpack_below > pack_gain:
            raise ValueError(f"gandiva: unpack_below ({unpack_below}) must not exceed pack_gain ({pack_gain}): "
                             "a pair packed at pack_gain would be unpacked at once")
        self.pack_gain = float(pack_gain)
        self.unpack_below = float(unpack_below)
        self.grow_gain = float(grow_gain)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.topo = topology
        self.packed: dict[int, int] = {}  # guest job -> host job
        self.unpacked: set[tuple[int, int]] = set()  # pairs that did not pay

    def normalised_pair(self, view: ClusterView, a: int, pa: Placement, b: int, pb: Placement) -> float:
        ja, jb = view.jobs[a], view.jobs[b]
        ba, bb = int(view.batch_sizes[a]), int(view.batch_sizes[b])
        sp = view.perf.speeds([ja, jb], [pa, pb], np.array([ba, bb]))
        return float(sp[0] / view.perf.alone_speed(ja, pa, ba) + sp[1] / view.perf.alone_speed(jb, pb, bb))

    def decide(self, view: ClusterView) -> Decision:
        ids = view.job_ids.tolist()
        idx = {jid: k for k, jid in enumerate(ids)}
        self.packed = {g: h for g, h in self.packed.items() if g in idx and h in idx}
        out: dict[int, Placement] = {}
        for k, pl in enumerate(view.placements):
            if pl is not None:
                out[ids[k]] = pl
        # Introspection: unpack pairs whose measured speeds say packing stopped paying.
        for g, h in list(self.packed.items()):
            kg, kh = idx[g], idx[h]
            pg, ph = view.placements[kg], view.placements[kh]
            if pg is None or ph is None:
                self.packed.pop(g)
                continue
            bg, bh = int(view.batch_sizes[kg]), int(view.batch_sizes[kh])
            norm = (view.speed[kg] / view.perf.alone_speed(view.jobs[kg], pg, bg)
                    + view.speed[kh] / view.perf.alone_speed(view.jobs[kh], ph, bh))
            if view.speed[kg] > 0 and norm < self.unpack_below:
                out.pop(g, None)
                self.packed.pop(g)
                self.unpacked.add((g, h))
        order = np.argsort([j.arrival_s for j in view.jobs], kind="stable")
        waiting = [int(k) for k in order if ids[int(k)] not in out]
        # Shrink grown jobs back to their request when others wait.
        if waiting:
            for k, jid in enumerate(ids):
                pl = out.get(jid)
                if pl is not None and pl.n_workers > view.jobs[k].requested_gpus and jid not in self.packed.values():
                    out[jid] = Placement(pl.gpus[: view.jobs[k].requested_gpus], pl.ps_sockets)
        occ = Occupancy(view, self.max_tasks_per_gpu)
        occ.commit_many([view.jobs[idx[j]] for j in out], list(out.values()))
        excl = Occupancy(view, 1)  # exclusive view: GPUs with no task at all
        excl.commit_many([view.jobs[idx[j]] for j in out], list(out.values()))
        # A packed GPU carries two tasks; as an exclusive slot it is simply taken
        # (a negative count would make every later fit check fail).
        np.maximum(excl.gpu_free, 0, out=excl.gpu_free)
        still: list[int] = []
        for k in waiting:
            job = view.jobs[k]
            pl = pack_placement(excl, view, job, job.requested_gpus)
            if pl is not None:
                out[job.job_id] = pl
                excl.commit(job, pl)
                occ.commit(job, pl)
            else:
                still.append(k)
        # Packing, when it pays: onto a same-size exclusive job's GPUs.
        hosts = [k for k, jid in enumerate(ids) if jid in out and jid not in self.packed
                 and jid not in self.packed.values()]
        for k in still:
            job = view.jobs[k]
            for h in hosts:
                hj = ids[h]
                hp = out[hj]
                if hp.n_workers != job.requested_gpus or (job.job_id, hj) in self.unpacked:
                    continue
                if hj in self.packed.values() or hj in self.packed:
                    continue
                gs = np.asarray(hp.gpus)
                ps = occ.ps_sockets_for(job, job.num_ps_requested, gs) \
                    if job.arch == "ps" else ()
                if ps is None:
                    continue
                pl = Placement.of(gs, ps)
                if not occ.fits(job, pl):
                    continue
                if self.normalised_pair(view, h, hp, k, pl) >= self.pack_gain:
                    out[job.job_id] = pl
                    occ.commit(job, pl)
                    self.packed[job.job_id] = hj
                    break
        if not still:
            self._migrate_or_grow(view, ids, out, excl)
        return Decision(placements=out)

    def _migrate_or_grow(self, view: ClusterView, ids: list[int], out: dict[int, Placement], excl: Occupancy) -> None:
        topo = self.topo
        busy = set(self.packed) | set(self.packed.values())
        free = excl.worker_capacity(view.jobs[0]) if view.jobs else np.zeros(0)
        # Migration: consolidate one spread job onto one server.
        for k, jid in enumerate(ids):
            pl = out.get(jid)
            if pl is None or jid in busy:
                continue
            servers = np.unique(topo.gpu_server[list(pl.gpus)])
            if servers.size > 1:
                cand = np.flatnonzero(excl.worker_capacity(view.jobs[k]) >= pl.n_workers)
                if cand.size:
                    s = int(cand[np.argmin(free[cand])])
                    gs = gpus_in_server(excl, s, pl.n_workers)
                    ps = excl.ps_sockets_for(view.jobs[k], pl.n_ps, gs) if pl.n_ps else ()
                    if gs.size == pl.n_workers and ps is not None:
                        new = Placement.of(gs, ps)
                        if excl.fits(view.jobs[k], new):
                            out[jid] = new
                            excl.commit(view.jobs[k], new)
                            return
        # Grow: one job to twice its request when that pays.
        for k, jid in enumerate(ids):
            pl = out.get(jid)
            job = view.jobs[k]
            if pl is None or jid in busy or pl.n_workers != job.requested_gpus or view.placements[k] is None:
                continue
            b = int(view.batch_sizes[k])
            now = view.perf.isolated_speed(job, pl.n_workers, pl.n_ps, b)
            if 2 * job.requested_gpus > view.topology.n_gpus:
                continue
            if view.perf.isolated_speed(job, 2 * pl.n_workers, pl.n_ps, b) < self.grow_gain * now:
                continue
            servers = np.unique(topo.gpu_server[list(pl.gpus)])
            cap = excl.worker_capacity(job)
            rest = np.argsort(-cap)
            order = np.concatenate([servers, rest[~np.isin(rest, servers)]])
            take = np.diff(np.minimum(np.cumsum(cap[order]), pl.n_workers), prepend=0)
            used = np.flatnonzero(take > 0)
            extra = [int(g) for i in used for g in gpus_in_server(excl, int(order[i]), int(take[i]))]
            if len(extra) == pl.n_workers:
                new = Placement(pl.gpus + tuple(extra), pl.ps_sockets)
                trial = Placement.of(extra, ())
                if excl.fits(job, trial):
                    out[jid] = new
                    excl.commit(job, trial)
                    return
