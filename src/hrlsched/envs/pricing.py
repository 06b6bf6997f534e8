"""Menu pricing of a decision point: what the predictor says of a
workload's jobs (each one's speed alone at the menu's allocations, and the
figures its job row needs), asked in as few vectorised calls of the
performance model as possible and kept while the predictor is the same.

What a decision point learns of a workload's jobs (``Workload``: their
profiles, the jobs as first seen, their architecture/mode variants, and
those priced figures) is kept for the last ``WORKLOADS_KEPT`` workloads, so
that a training pool that comes back to a workload finds its jobs priced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np

from hrlsched.contract import ARCHS, MODES, ClusterView, effective_job
from hrlsched.core.catalogue import ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.envs import features as F
from hrlsched.envs.candidates import CandidateTable
from hrlsched.perf.base import PerformanceModel

# Workloads whose jobs a decision point keeps what it learnt of between episodes (a training pool's seeds).
WORKLOADS_KEPT = 16
# Most entries any cache of a decision point holds (its pricing's, observation's, masks' and hint's):
# past it, the cache is emptied at the next point (``bound``). A long training run keeps meeting new
# keys without end (valid slot sets, requests, free GPU counts, rooms), and emptying a cache changes no
# figure: it only costs making again what is asked for again.
CACHE_ENTRIES = 4096


def bound(caches: Iterable[dict]) -> None:
    """Empty each of ``caches`` past ``CACHE_ENTRIES`` entries."""
    for c in caches:
        if len(c) > CACHE_ENTRIES:
            c.clear()


class JobFacts(NamedTuple):
    """What the job rows need of a job that does not move while its
    allocation stays: its workers and PSs; its predicted speeds alone at its
    request, with one more worker and at its current allocation; its
    profile, choices (named as the job features they fill) and arrival."""

    workers: int
    ps: int
    speed_requested: float
    speed_one_more: float
    speed_now: float
    params_gb: float
    sample_ms: float
    requested_gpus: float
    arch_ps: bool
    mode_async: bool
    arch_open: bool
    mode_open: bool
    arrival_s: float


#: ``JobFacts``' columns in the matrix of the jobs' facts (``observe``)
FACTS = F.Columns(JobFacts._fields)


class ValidSpeeds(NamedTuple):
    """A job's slot speeds on its valid slots as the candidate rows use them
    (read-only arrays): speeds over the request ``req``, speeds at least
    1e-12 where positive (else 1), 1 where a speed is positive else 0."""

    req: float
    rate: np.ndarray
    safe: np.ndarray
    pos: np.ndarray


class Workload:
    """What a decision point learns of one workload's jobs: their profiles
    (and whether every CPU and memory figure of them is a whole number),
    first-seen jobs and architecture/mode variants, and what the predictor
    says of them (speeds, job facts, slot speeds), kept for the predictor
    ``priced_by`` only."""

    __slots__ = ("profiles", "whole", "base_jobs", "variants", "priced_by", "speeds", "facts", "slot_speeds",
                 "valid_speeds")

    def __init__(self) -> None:
        self.profiles: dict[str, ModelProfile] = {}
        self.whole = True
        self.base_jobs: dict[int, Job] = {}
        self.variants: dict[tuple[int, str, str], Job] = {}
        self.priced_by: object | None = None
        self.speeds: dict[tuple, float] = {}
        self.facts: dict[tuple, JobFacts] = {}
        self.slot_speeds: dict[tuple[int | str, int], np.ndarray] = {}
        self.valid_speeds: dict[tuple[int | str, int, bytes, float], ValidSpeeds] = {}

    def priced(self) -> tuple[dict, ...]:
        """The caches of priced figures."""
        return (self.speeds, self.facts, self.slot_speeds, self.valid_speeds)

    def learn(self, view: ClusterView) -> None:
        """Remember the jobs seen for the first time (and their models'
        profiles); drop the priced figures if the predictor changed."""
        if view.perf is not self.priced_by:  # predicted speeds are the predictor's
            for c in self.priced():
                c.clear()
            self.priced_by = view.perf
        profiles, bases = self.profiles, self.base_jobs
        for job in view.jobs:
            if job.job_id not in bases:
                bases[job.job_id] = job
                if job.model not in profiles:
                    pr = profiles[job.model] = get_profile(job.model, view.catalogue)
                    self.whole = self.whole and all(
                        float(x).is_integer() for x in (pr.worker_cores, pr.worker_mem_gb, pr.ps_cores, pr.ps_mem_gb))

    def effective(self, cur: Job, arch: str | None, mode: str | None) -> Job:
        """``cur`` with ``arch``/``mode`` where it leaves them open (made once per workload)."""
        base = self.base_jobs[cur.job_id]
        a = arch if arch is not None and base.arch_open else cur.arch
        m = mode if mode is not None and base.mode_open else cur.mode
        if (a, m) == (cur.arch, cur.mode):
            return cur
        key = (cur.job_id, a, m)
        job = self.variants.get(key)
        if job is None:
            job = self.variants[key] = effective_job(base, a, m)
        return job


class Pricing:
    """The predicted speeds of a decision point's jobs at the menu's slots
    (``table``), from the predictor of the point's view, kept in the current
    ``Workload`` (``reset``)."""

    def __init__(self, table: CandidateTable, n_gpus: int) -> None:
        self.table = table
        self.n_gpus = n_gpus
        self._workloads: dict[object, Workload] = {}  # see reset, least recently used first
        self.workload = Workload()
        self.perf: PerformanceModel | None = None  # the point's predictor (``begin``)

    def reset(self, workload: object | None) -> Workload:
        """A new episode: the ``Workload`` of ``workload`` (an object standing
        for the episode's jobs) if it was seen in one of the last
        ``WORKLOADS_KEPT`` episodes, else a new one."""
        known = self._workloads.pop(workload, None) if workload is not None else None
        w = known if known is not None else Workload()
        if workload is not None:
            self._workloads[workload] = w
            while len(self._workloads) > WORKLOADS_KEPT:
                del self._workloads[next(iter(self._workloads))]  # the least recently used
        self.workload = w
        return w

    def share(self, other: Pricing) -> bool:
        """Read and fill ``other``'s priced figures (``Workload.priced``: what its predictor said
        of this episode's jobs) where both price the same menu on the same cluster size, as
        another decision point deciding on the same view does: the figures are the same for the
        same keys. (The jobs and profiles each learns stay its own: its parts hold them.) Whether
        it does."""
        a, b = self.table, other.table
        same = self.n_gpus == other.n_gpus and (a is b or all(
            np.array_equal(getattr(a, f), getattr(b, f)) for f in ("workers", "ps", "arch", "mode")))
        if same:
            w, o = self.workload, other.workload
            w.priced_by, w.speeds, w.facts, w.slot_speeds, w.valid_speeds = \
                o.priced_by, o.speeds, o.facts, o.slot_speeds, o.valid_speeds
        return same

    def begin(self, view: ClusterView) -> None:
        """A new point: its new jobs learnt, its predictor used."""
        self.workload.learn(view)
        self.perf = view.perf

    def slot_job(self, cur: Job, c: int) -> Job:
        """Job ``cur`` as menu slot ``c`` runs it (its architecture and mode, where open)."""
        t = self.table
        return self.workload.effective(cur, ARCHS[t.arch[c]], MODES[t.mode[c]])

    def who(self, job: Job) -> int | str:
        """Whose predictions a speed cache key names: the job's model where
        the predictor's speeds depend on a job only through its model (jobs
        of one model share them: a point where hundreds of jobs are new
        prices each model once), else the job itself."""
        return job.model if self.perf.per_model else job.job_id  # type: ignore[union-attr]

    def speed(self, job: Job, w: int, p: int, bs: int) -> float:
        v = self.workload.speeds.get((self.who(job), job.arch, job.mode, bs, w, p))
        return v if v is not None else self.speeds([(job, w, p, bs)])[0]

    def speeds(self, items: Sequence[tuple[Job, int, int, int]]) -> list[float]:
        """Predicted progress rate alone (samples/s, times the statistical
        efficiency of an asynchronous job) of each (job, workers, PSs, batch
        size) on a consolidated placement; the uncached ones in one
        vectorised call of the performance model."""
        perf = self.perf
        assert perf is not None, "Pricing: begin(view) first"
        cache = self.workload.speeds
        who = self.who
        out: list[float] = []
        miss: dict[tuple, list[int]] = {}
        for i, (job, w, p, bs) in enumerate(items):
            key = (who(job), job.arch, job.mode, bs, w, p)
            v = cache.get(key)
            if v is None:
                if w < 1:
                    v = cache[key] = 0.0
                else:
                    miss.setdefault(key, []).append(i)
            out.append(0.0 if v is None else v)
        if miss:
            first = [items[ix[0]] for ix in miss.values()]
            jobs = [j for j, _, _, _ in first]
            pls = [perf.compact_placement(w, p if j.arch == "ps" else 0) for j, w, p, _ in first]
            bs = np.array([b for _, _, _, b in first], dtype=np.int64)
            try:
                sp = perf.alone_speeds(jobs, pls, bs)
            except ValueError:  # a measured backend has no data for some: 0, and their slots are masked
                sp = np.array([perf.alone_speed_or_zero(j, pl, int(b)) for j, pl, b in zip(jobs, pls, bs.tolist())])
            if any(j.mode == "async" for j in jobs):  # progress, not samples: stale gradients are worth less
                sp = sp * perf.efficiency(jobs, pls, bs, np.zeros(len(jobs)))
            for (key, ix), v in zip(miss.items(), sp.tolist()):
                cache[key] = v
                for i in ix:
                    out[i] = v
        return out

    def job_facts(self, view: ClusterView, n: int) -> list[JobFacts]:
        """``JobFacts`` of the first ``n`` jobs of ``view``; the speeds of those
        not kept yet priced in one call."""
        facts = self.workload.facts
        get = facts.get
        rows: list = []
        miss = []  # (row, job, key) of the facts not kept yet
        for j, pl, b in zip(view.jobs[:n], view.placements[:n], view.batch_sizes[:n].tolist()):
            key = (j.job_id, j.arch, j.mode, b, 0, 0) if pl is None else \
                (j.job_id, j.arch, j.mode, b, len(pl.gpus), len(pl.ps_sockets))
            r = get(key)
            if r is None:
                miss.append((len(rows), j, key))
            rows.append(r)
        if miss:
            need = []  # the speeds the missing facts need, in one call: at the request, now, one more worker
            for _, j, (_, _, _, b, w0, p0) in miss:
                p1 = max(p0, 1) if j.arch == "ps" else 0
                need += [(j, j.requested_gpus, j.num_ps_requested, b), (j, w0, p1, b)]
                if w0 + 1 <= self.n_gpus:
                    need.append((j, w0 + 1, p1, b))
            sp = self.speeds(need)
            at = 0
            profiles, bases = self.workload.profiles, self.workload.base_jobs
            for i, j, key in miss:
                w0, p0 = key[4], key[5]
                more = w0 + 1 <= self.n_gpus
                prof, base = profiles[j.model], bases[j.job_id]
                rows[i] = facts[key] = JobFacts(
                    w0, p0, sp[at], sp[at + 2] if more else 0.0, sp[at + 1],
                    prof.params_mb / 1000.0, prof.sample_time_s * 1000.0, j.requested_gpus / F.WORKER_SCALE,
                    j.arch == "ps", j.mode == "async", base.arch_open, base.mode_open, j.arrival_s,
                )
                at += 3 if more else 2
        return rows

    def slot_vector(self, cur: Job, bs: int, slots: np.ndarray) -> np.ndarray:
        """Predicted speed alone of job ``cur`` at batch size ``bs`` at every
        menu slot (wait and keep: 0), one vector per job (or model, ``who``)
        and batch size kept for the workload; the ``slots`` not priced yet
        are priced now, in one call."""
        t = self.table
        vectors = self.workload.slot_speeds
        key = (self.who(cur), bs)
        vec = vectors.get(key)
        if vec is None:
            vec = vectors[key] = np.full(t.size, np.nan)
            vec[:2] = 0.0  # wait, keep: set apart
        sub = vec[slots]
        new = slots[sub != sub].tolist()  # NaN: slots asked for the first time
        if new:
            vec[new] = self.speeds([(self.slot_job(cur, c), int(t.workers[c]), int(t.ps[c]), bs) for c in new])
        return vec

    def slot_speeds(self, cur: Job, bs: int, valid: np.ndarray) -> np.ndarray:
        """``slot_vector`` on the ``valid`` slots (bool), 0 elsewhere."""
        return np.where(valid, self.slot_vector(cur, bs, np.flatnonzero(valid)), 0.0)

    def price_menus(self, view: ClusterView, open_slots: Callable[[Job, Job], np.ndarray]) -> None:
        """Price the whole menu (``open_slots`` of a job and its first-seen
        self) of each (model, batch size) seen for the first time at this
        point, in one call of the performance model: a vectorised solve
        costs a fraction per allocation of one solve per call, and the
        heuristic hint (which asks for these consolidated allocations one by
        one) then finds most of them priced. Only where jobs of one model
        share their speeds (``per_model``) and the predictor prices every
        allocation; elsewhere slots are priced as they are asked for
        (``slot_vector``). The same speeds either way."""
        perf, t = view.perf, self.table
        if not (perf.per_model and perf.prices_everything):
            return
        vectors = self.workload.slot_speeds
        bases = self.workload.base_jobs
        effective = self.workload.effective
        items: list[tuple[Job, int, int, int]] = []
        where: list[tuple[np.ndarray, int]] = []
        new: dict[tuple[str, int], set[int]] = {}  # the pairs new here: the slots asked for so far
        for cur, bs in zip(view.jobs, view.batch_sizes.tolist()):
            key = (cur.model, bs)
            asked = new.get(key)
            if asked is None:
                if key in vectors:
                    continue
                asked = new[key] = set()
                vec = vectors[key] = np.full(t.size, np.nan)
                vec[:2] = 0.0  # wait, keep: set apart
            else:
                vec = vectors[key]
            for c in open_slots(cur, bases[cur.job_id]).tolist():  # its menu (jobs of a model may differ)
                if c not in asked:
                    asked.add(c)
                    items.append((effective(cur, ARCHS[t.arch[c]], MODES[t.mode[c]]), int(t.workers[c]),
                                  int(t.ps[c]), bs))
                    where.append((vec, c))
        if items:
            for (vec, c), v in zip(where, self.speeds(items)):
                vec[c] = v

    def valid_slot_terms(self, cur: Job, bs: int, vk: bytes, ix: np.ndarray, req: float) -> ValidSpeeds:
        """``slot_vector`` on the valid slots ``ix`` (their mask's bytes ``vk``;
        wait and keep 0) as the candidate rows use it. Once priced, a slot's
        speed never changes, so they are kept per job (or model, ``who``),
        batch size, valid slots and the request's speed."""
        cache = self.workload.valid_speeds
        key = (self.who(cur), bs, vk, req)
        v = cache.get(key)
        if v is None or v.req != req:
            sv = self.slot_vector(cur, bs, ix)[ix]
            pos = sv > 0  # (where not, any finite divisor: its hours are multiplied by 0)
            v = ValidSpeeds(req, np.minimum(sv / req, F.BIG), np.where(pos, np.maximum(sv, 1e-12), 1.0),
                            pos.astype(float))
            for a in v[1:]:
                a.flags.writeable = False
            cache[key] = v
        return v
