"""The observation of a decision point's current choice (``features``):
its rows written by feature name, what a point shares made once per point
(the job and link matrices, the per-job figures the candidate rows read),
what a choice changes made per choice, and the candidate rows in two parts
(a fixed part kept per valid slots and job allocation, and the columns
``DYN_COLUMNS`` that change from one choice to the next).
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from hrlsched.contract import ARCHS, MODES
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs import features as F
from hrlsched.envs.candidates import KEEP, WAIT
from hrlsched.envs.masks import PartialPlacement
from hrlsched.envs.pricing import FACTS

if TYPE_CHECKING:
    from hrlsched.envs.decision import DecisionPoint

J, C = F.JOB, F.CANDIDATE
# The context and cluster columns (module constants: read per choice)
_X_WORKER, _X_PS = F.CONTEXT["phase_place_worker"], F.CONTEXT["phase_place_ps"]
_X_WORKERS_LEFT, _X_PS_LEFT, _X_DONE = F.CONTEXT["workers_left"], F.CONTEXT["ps_left"], F.CONTEXT["tasks_done"]
_L_TIME, _L_ACTIVE, _L_QUEUED = F.CLUSTER["log_time_h"], F.CLUSTER["active_jobs"], F.CLUSTER["queued_jobs"]
_L_FREE, _L_IDLE = F.CLUSTER["free_gpus_decided"], F.CLUSTER["free_gpus_before"]
_L_CORES, _L_MEM = F.CLUSTER["free_cores"], F.CLUSTER["free_mem"]
_L_LEFT, _L_POINTS = F.CLUSTER["jobs_left_to_decide"], F.CLUSTER["log_decision_points"]
# ``dyn``'s columns (``DYN_FEATURES``' order): those of the keep row made apart, the hint's
DYN = F.Columns(F.DYN_FEATURES)
_D_KEEP, _D_HINT = DYN.span("speed_vs_requested", "share_of_free_gpus"), DYN["is_hint"]


class SpreadRows(NamedTuple):
    """A ``base`` of candidate rows spread over the menu's rows (``full``),
    and where ``dyn`` goes in it (``flat``, flat indices)."""

    base: np.ndarray
    full: np.ndarray
    flat: np.ndarray


class Spanned(NamedTuple):
    """Servers spanned (/ 4) on the valid slots, from the ``servers`` array."""

    servers: np.ndarray
    spanned: np.ndarray


class Observer:
    """The observations of decision point ``dp`` (which it reads: the view,
    the board, the job being decided and the phase). ``begin`` at each point;
    ``rows_dirty``: set where the board or the job being placed changed
    other than by one task (``worker_placed``/``ps_placed``), so that the GPU
    and socket rows are made again at the next observation."""

    def __init__(self, dp: DecisionPoint) -> None:
        self.dp = dp
        topo, t = dp.topo, dp.table
        self.topo, self.table, self.max_jobs = topo, t, dp.max_jobs
        self.n_links = dp.n_links
        # What never changes: static observation parts, the menu's columns.
        self._gpu_groups = F.gpu_groups(topo, dp.max_gpus)
        self._links_static = F.static_links(dp.link_kind, dp.link_cap, dp.max_links)
        self.rows = F.Rows(topo, dp.max_gpus, dp.max_sockets, dp.max_tasks)
        self._cores_total = max(topo.server_cores.sum(), 1e-9)
        self._mem_total = max(topo.server_mem_gb.sum(), 1e-9)
        self._gm = np.zeros(dp.max_gpus, dtype=np.int8)
        self._gm[: topo.n_gpus] = 1
        self._sm = np.zeros(dp.max_sockets, dtype=np.int8)
        self._sm[: topo.n_sockets] = 1
        self._lm = np.zeros(dp.max_links, dtype=np.int8)
        self._lm[: self.n_links] = 1
        self._one_hot = np.eye(self.max_jobs + 1, self.max_jobs, dtype=np.int8)  # ``current_job`` per k; last: none
        self._ctx_alloc = np.zeros(len(F.CONTEXT_FEATURES), dtype=np.float32)
        self._ctx_alloc[F.CONTEXT["phase_allocate"]] = 1.0
        self._ctx_place = np.zeros(len(F.CONTEXT_FEATURES), dtype=np.float32)
        self._no_candidates = np.zeros((dp.n_cand, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
        self._tw, self._tp = t.workers.astype(float), t.ps.astype(float)
        self._ta = (t.arch == ARCHS.index("ps")).astype(float)
        self._tm = (t.mode == MODES.index("async")).astype(float)
        cs = np.zeros((t.size, len(F.CANDIDATE_FEATURES)), dtype=np.float32)
        cs[WAIT, C["is_wait"]] = 1.0
        cs[KEEP, C["is_keep"]] = 1.0
        cs[:, C["workers"]] = self._tw / F.WORKER_SCALE  # wait and keep: 0 (keep's are the job's own)
        cs[:, C["ps"]] = self._tp / F.WORKER_SCALE
        cs[:, C["arch_ps"]] = self._ta
        cs[:, C["mode_async"]] = self._tm
        self._cand_static = cs
        self._cand_workers = cs[:, C["workers"]].copy()  # (one column, contiguous: ``rule_rows`` takes it per choice)
        # the residual's partners of each menu slot (``agent.residual``): the slots of its architecture
        # and mode with twice and with half its workers, as the residual compares them (wait and
        # keep are no one's partner: their rows score 0)
        tw, ta, tm = cs[:, C["workers"]], cs[:, C["arch_ps"]], cs[:, C["mode_async"]]
        same = (ta[None, :] == ta[:, None]) & (tm[None, :] == tm[:, None])
        self._twice = same & (np.abs(tw[None, :] - 2.0 * tw[:, None]) < 1e-6)
        self._half = same & (np.abs(tw[None, :] - 0.5 * tw[:, None]) < 1e-6)
        self._twice[:, : KEEP + 1] = self._half[:, : KEEP + 1] = False
        self._no_restart = np.zeros(t.size)
        self._restart_sets: dict[tuple, np.ndarray] = {}
        self._share: dict[tuple, np.ndarray] = {}  # the valid slots' workers over the free GPUs, per (free, slots)
        self._spanned: dict[tuple, Spanned] = {}  # per (servers array, valid slots)
        self._zeros: dict[int, np.ndarray] = {}  # a zero column per number of valid slots
        self._cand_base: dict[tuple, np.ndarray] = {}  # the candidate rows' fixed part (``candidate_matrix``)
        self._cand_full: dict[int, SpreadRows] = {}  # per ``base``, by its id
        self._servers: dict[tuple[int, str], np.ndarray] = {}  # servers spanned per slot, by (board version, model)
        self.rows_dirty = True
        self.reset()
        self.begin()

    def caches(self) -> tuple[dict, ...]:
        return (self._restart_sets, self._share, self._spanned, self._zeros, self._cand_base, self._cand_full)

    def reset(self) -> None:
        """A new episode."""
        self._past = (-1, 0.0)  # (decisions, their feature)

    def begin(self) -> None:
        """A new point: its share of the observation is made at its first observation."""
        self._prepared = self._rules_prepared = False
        self.rows_dirty = True
        self._cluster_board: tuple[int, tuple[float, ...]] = (-1, ())
        self._links_version = -1
        self._servers.clear()  # (keyed by the board's version: of this point only)

    def worker_placed(self, part: PartialPlacement, g: int) -> None:
        if not self.rows_dirty:
            self.rows.worker(part, g)

    def ps_placed(self, part: PartialPlacement, sock: int) -> None:
        if not self.rows_dirty:
            self.rows.ps(part, sock)

    def _prepare(self) -> None:
        """What the observations of a point share (skipped at points with no choice)."""
        dp = self.dp
        view, n = dp.view, dp.n_dec
        assert view is not None
        self._jobs_m = self._job_matrix(n)
        self._jm = np.zeros(self.max_jobs, dtype=np.int8)
        self._jm[:n] = 1
        util = F.link_utilisation(view.perf, view, self.n_links)
        self._links_m = self._links_static.copy()
        if util is not None:
            self._links_m[: util.size, F.LINK["utilisation"]] = util
        self.rows.point(view)
        self.rows_dirty = True
        self._prepare_rules(self.req_speed)
        self._cluster_point = (
            float(np.log1p(view.time_s / F.HOUR)), len(view.jobs) / self.max_jobs,
            self._queued,
            self._idle,
        )
        self._prepared = True

    def _prepare_rules(self, req: np.ndarray | None = None) -> None:
        """What ``rule_rows`` reads of a point (a part of ``_prepare``): per job, as Python numbers
        (read once per choice), the speed at its request (``req``: ``_job_matrix``'s, else from the
        same facts), remaining work, speed and batch size, and the running async jobs' efficiency."""
        dp = self.dp
        view, n = dp.view, dp.n_dec
        assert view is not None
        if req is None:
            facts = dp.pricing.job_facts(view, n)
            req = np.maximum(np.fromiter((f.speed_requested for f in facts), dtype=float, count=n), 1e-12)
        self._req_l = req.tolist()
        self._rem_l, self._speed_l = view.remaining.tolist(), view.speed.tolist()
        self._bs_l = view.batch_sizes.tolist()
        # the statistical efficiency of the running async jobs at their placements (their
        # keep rows' progress), in one call of the performance model: one value per job
        jobs, pls = view.jobs, view.placements
        ks = [k for k in range(n) if pls[k] is not None and jobs[k].mode == "async" and self._speed_l[k] > 0]
        self._keep_eff: dict[int, float] = {}
        if ks:
            eff = view.perf.efficiency([jobs[k] for k in ks], [pls[k] for k in ks], view.batch_sizes[ks],
                                       np.zeros(len(ks)))
            self._keep_eff = dict(zip(ks, np.asarray(eff, dtype=float).tolist()))
        # the cluster row's shares of jobs queued and of GPUs idle at the point (``residual_rows``)
        self._queued = sum(p is None for p in view.placements) / self.max_jobs
        self._idle = float(np.count_nonzero(view.gpu_tasks == 0)) / self.topo.n_gpus
        self._rules_prepared = True

    def observation(self, full: bool, choosing: bool) -> dict[str, np.ndarray]:
        """``DecisionPoint.observation``; ``choosing``: an allocation choice
        of the agent (its candidate rows; else zero)."""
        dp = self.dp
        if not self._prepared:
            self._prepare()
        board = dp.board
        n, k = dp.n_dec, dp.k
        cur = self._one_hot[k if 0 <= k < n else -1].copy()  # one copy of a kept row
        obs = {"cluster": self._cluster_row(), "context": self._context_row(), "current_job": cur,
               "action_mask": dp.mask().copy()}
        if dp.agent_allocates:
            obs["candidates"] = self._candidate_matrix() if choosing else self._no_candidates.copy()
        if not full:
            return obs
        if self.rows_dirty:
            self.rows.rewrite(board, dp.part)
            self.rows_dirty = False
        if self._links_version != board.version:
            self._links_m[: self.n_links, F.LINK["jobs_crossing"]] = board.link_jobs / 4.0
            self._links_version = board.version
        jobs = self._jobs_m.copy()
        jobs[:, J["decided"]] = dp.decided
        jobs[:, J["chosen_workers"]] = dp.chosen / F.WORKER_SCALE
        if 0 <= k < n:
            jobs[k, J["is_current"]] = 1.0
        obs.update({
            "jobs": jobs, "job_mask": self._jm.copy(), "gpus": self.rows.gpus.copy(), "gpu_mask": self._gm.copy(),
            "gpu_groups": self._gpu_groups.copy(), "sockets": self.rows.sockets.copy(),
            "socket_mask": self._sm.copy(), "links": self._links_m.copy(), "link_mask": self._lm.copy(),
        })
        return obs

    def allocation_rows(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``DecisionPoint.allocation_rows``."""
        if not self._prepared:
            self._prepare()
        base, dyn, ix = self._candidate_rows()
        return self.dp.k, self._cluster_row(), self._context_row(), base, dyn, ix

    def rule_rows(self) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
        """``DecisionPoint.rule_rows``."""
        if not self._rules_prepared:
            self._prepare_rules()
        dp = self.dp
        t, view, k = self.table, dp.view, dp.k
        assert view is not None
        valid, vk, idx, ix, _ = dp.valid_slots
        cur, cur_pl = view.jobs[k], view.placements[k]
        req = max(self._req_l[k], 1e-12)
        bs = self._bs_l[k]
        _, rate, _, _ = dp.pricing.valid_slot_terms(cur, bs, vk, ix, req)
        speed = np.array(rate, dtype=np.float32)  # as ``dyn``'s first column
        workers = self._cand_workers[ix]
        if valid[KEEP]:  # the second row: the job's own allocation (as in ``_candidate_rows``)
            assert cur_pl is not None
            workers[1] = min(cur_pl.n_workers / F.WORKER_SCALE, F.BIG)
            speed[1] = min(self._keep_speed(k, cur, cur_pl, bs) / req, F.BIG)
        hint = -1
        if dp.hint.policy is not None:
            hint = bisect.bisect_left(idx, dp.hint.slot(t, valid, vk, cur, cur_pl, dp.base_jobs))
        return speed, hint, workers, ix

    def residual_rows(self) -> tuple[float, float, np.ndarray, np.ndarray]:
        """``DecisionPoint.residual_rows``."""
        if not self._rules_prepared:
            self._prepare_rules()
        return float(np.float32(self._idle)), float(np.float32(self._queued)), self._twice, self._half

    def _cluster_row(self) -> np.ndarray:
        dp = self.dp
        board, n, k = dp.board, dp.n_dec, dp.k
        if self._cluster_board[0] != board.version:
            occ = board.occ
            add = np.add.reduce  # ``ndarray.sum``'s reduction, without its Python wrapper
            self._cluster_board = (board.version, (
                board.free_slots() / self.topo.n_gpus,
                add(occ.cores_free) / self._cores_total,
                add(occ.mem_free) / self._mem_total,
            ))
        if self._past[0] != dp.decisions:  # the points decided so far, as a feature (once per point)
            self._past = (dp.decisions, float(np.log1p(dp.decisions)))
        row = np.empty(len(F.CLUSTER_FEATURES), dtype=np.float32)
        row[_L_TIME], row[_L_ACTIVE], row[_L_QUEUED], row[_L_IDLE] = self._cluster_point
        row[_L_FREE], row[_L_CORES], row[_L_MEM] = self._cluster_board[1]
        row[_L_LEFT] = max(n - k, 0) / self.max_jobs
        row[_L_POINTS] = self._past[1]
        return row

    def _context_row(self) -> np.ndarray:
        part = self.dp.part
        if part is None:  # an allocation choice: always the same row
            return self._ctx_alloc.copy()
        row = self._ctx_place.copy()
        row[_X_WORKER if part.placing_worker else _X_PS] = 1.0
        row[_X_WORKERS_LEFT] = (part.n_workers - len(part.gpus)) / F.WORKER_SCALE
        row[_X_PS_LEFT] = (part.n_ps - len(part.sockets)) / F.WORKER_SCALE
        row[_X_DONE] = (len(part.gpus) + len(part.sockets)) / max(part.n_workers + part.n_ps, 1)
        return row

    def _job_matrix(self, n: int) -> np.ndarray:
        dp = self.dp
        view = dp.view
        assert view is not None
        out = np.zeros((self.max_jobs, len(F.JOB_FEATURES)), dtype=np.float32)
        if n == 0:
            self.req_speed = np.zeros(0)
            return out
        rows = dp.pricing.job_facts(view, n)
        facts = np.fromiter(itertools.chain.from_iterable(rows), dtype=float, count=len(FACTS) * n)
        facts = facts.reshape(n, len(FACTS))
        cw = facts[:, FACTS["workers"]]
        req = np.maximum(facts[:, FACTS["speed_requested"]], 1e-12)
        prog, rem = view.progress[:n], view.remaining[:n]
        o = out[:n]
        o[:, J["valid"]] = 1.0
        o[:, J["running"]] = cw > 0
        o[:, J.span("workers", "ps")] = facts[:, FACTS.span("workers", "ps")] / F.WORKER_SCALE
        o[:, J["log_age_h"]] = np.log1p((view.time_s - facts[:, FACTS["arrival_s"]]) / F.HOUR)
        o[:, J["progress_frac"]] = prog / np.maximum(prog + rem, 1e-12)
        o[:, J["log_remaining_h"]] = np.log1p(rem / req / F.HOUR)
        o[:, J["speed_vs_requested"]] = view.speed[:n] / req
        o[:, J["gain_one_more_worker"]] = (facts[:, FACTS["speed_one_more"]] - facts[:, FACTS["speed_now"]]) / req
        o[:, J.span("params_gb", "mode_open")] = facts[:, FACTS.span("params_gb", "mode_open")]
        o[:, J["log_restarts"]] = np.log1p(view.restarts[:n])
        o[:, J["log_attained_gpu_h"]] = np.log1p(view.attained_gpu_s[:n] / F.HOUR)
        if dp.hint.allocs:
            o[:, J["hint_workers"]] = [w / F.WORKER_SCALE for w in dp.hint.workers(view.jobs[:n])]
        self.req_speed = req
        np.clip(o, -F.BIG, F.BIG, out=o)  # (the padding rows are zero)
        return out

    def _candidate_matrix(self) -> np.ndarray:
        """The candidate rows of the current job (``t.size`` rows); only the
        valid slots are computed (``_candidate_rows``), the others stay zero."""
        base, dyn, ix = self._candidate_rows()
        # ``base`` spread over the menu's rows, kept per ``base`` (the same object while its key
        # holds), and where ``dyn`` goes in it as flat indices: a copy and one ``put`` per choice
        e = self._cand_full.get(id(base))
        if e is None or e.base is not base:  # holds ``base``: its id is not reused while here
            full = np.zeros((self.table.size, base.shape[1]), dtype=np.float32)
            full[ix] = base
            flat = (ix[:, None] * base.shape[1] + np.array(F.DYN_COLUMNS)).ravel()
            e = self._cand_full[id(base)] = SpreadRows(base, full, flat)
        out = e.full.copy()
        np.put(out, e.flat, dyn)  # ``dyn``'s rows in C order, as ``flat``
        return out

    def _candidate_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The current job's candidate rows on its valid slots ``ix`` (index
        array, ascending) in two parts: ``base``, the rows with the columns
        ``DYN_COLUMNS`` zero, which depends only on the valid slots, the job's
        current allocation and restart delay (one array per such key, kept:
        the same object again; read-only), and ``dyn`` (float32, one row per
        valid slot), those columns (speed over the request, hours to finish,
        servers spanned, share of the free GPUs, hint) for this choice. The
        rows are ``base`` with ``dyn`` written into ``DYN_COLUMNS``; both are
        clipped at ``F.BIG`` (each part where it is made: a float32 rounding
        and the clip commute)."""
        dp = self.dp
        t, view, k, board = self.table, dp.view, dp.k, dp.board
        assert view is not None
        valid, vk, idx, ix, _ = dp.valid_slots
        cur = view.jobs[k]
        cur_pl = view.placements[k]
        prof = dp.profiles[cur.model]
        now = None if cur_pl is None else (cur_pl.n_workers, cur_pl.n_ps, cur.arch == "ps", cur.mode == "async")
        bkey = (vk, now, prof.restart_s)
        base = self._cand_base.get(bkey)
        if base is None:
            base = self._cand_static[ix]  # valid, wait, keep, workers, PSs, arch, mode of the menu
            base[:, C["valid"]] = 1.0
            if valid[KEEP]:  # the second row
                assert now is not None
                base[1, C.span("workers", "mode_async")] = (now[0] / F.WORKER_SCALE, now[1] / F.WORKER_SCALE,
                                                            now[2], now[3])
            base[:, C["restarts_job"]] = self._restarts(cur, cur_pl)[ix]
            base[:, C["restart_cost"]] = base[:, C["restarts_job"]] * (prof.restart_s / F.RESTART_SCALE)
            np.minimum(base, F.BIG, out=base)
            base.flags.writeable = False
            self._cand_base[bkey] = base
        req = max(self._req_l[k], 1e-12)
        bs = self._bs_l[k]
        _, rate, safe, pos = dp.pricing.valid_slot_terms(cur, bs, vk, ix, req)
        free = max(board.free_slots(), 1)
        # servers spanned (/ 4) and share of the free GPUs on the valid slots, kept per
        # (servers array, valid slots) and (free GPUs, valid slots)
        skey = (board.version, cur.model)
        servers = self._servers.get(skey)
        if servers is None:
            servers = dp.feas.servers(board, cur, t.workers)
            if servers is not None:
                self._servers[skey] = servers
        if servers is None:
            spanned = np.zeros(len(idx))
            for i, c in enumerate(idx):
                if c > KEEP:
                    pl = dp.feas.place(view, board, dp.pricing.slot_job(cur, c), int(t.workers[c]), int(t.ps[c]))
                    assert pl is not None
                    spanned[i] = min(dp.placement_index.spanned(pl) / 4.0, F.BIG)
        else:
            e = self._spanned.get((id(servers), vk))
            if e is None or e.servers is not servers:  # holds the array: its id is not reused while here
                sp = np.minimum(servers[ix] / 4.0, F.BIG)
                sp[0] = 0.0  # wait (always valid: the first row)
                e = self._spanned[(id(servers), vk)] = Spanned(servers, sp)
            spanned = e.spanned
        share = self._share.get((free, vk))
        if share is None:
            share = self._share[(free, vk)] = np.minimum(self._tw[ix] / free, F.BIG)
        # speed over the request, hours to finish (0 where no speed), servers, share, hint:
        # the same IEEE operations per element as one by one
        rem = self._rem_l[k]
        hours = rem / safe
        hours /= F.HOUR
        np.log1p(hours, out=hours)
        hours *= pos
        if not rem < 1e290:  # only then can the log of a finite quotient exceed BIG (about 710 at most)
            np.minimum(hours, F.BIG, out=hours)
        zero = self._zeros.get(len(idx))
        if zero is None:
            zero = self._zeros[len(idx)] = np.zeros(len(idx))
            zero.flags.writeable = False
        # made column by column (``DYN_FEATURES``' order) in one call (its transpose: the rows, as a view)
        dyn = np.array((rate, hours, spanned, share, zero), dtype=np.float32).T
        if valid[KEEP]:  # the second row: the job's own allocation
            assert cur_pl is not None
            cw = cur_pl.n_workers
            x = self._keep_speed(k, cur, cur_pl, bs)
            big = F.BIG
            dyn[1, _D_KEEP] = (min(x / req, big),
                               min(math.log1p(rem / max(x, 1e-12) / F.HOUR), big) if x > 0 else 0.0,
                               min(dp.placement_index.spanned(cur_pl) / 4.0, big), min(cw / free, big))
        if dp.hint.policy is not None:  # its slot: wait, keep or a valid candidate
            dyn[bisect.bisect_left(idx, dp.hint.slot(t, valid, vk, cur, cur_pl, dp.base_jobs)), _D_HINT] = 1.0
        return base, dyn, ix

    def _keep_speed(self, k: int, cur: Job, cur_pl: Placement, bs: int) -> float:
        """The speed of job ``k`` at its own allocation (its keep row): as it runs, else predicted."""
        x = self._speed_l[k]
        if x > 0:
            if cur.mode == "async":  # measured samples/s: as progress, like the other slots
                x *= self._keep_eff[k]
            return x
        return self.dp.pricing.speed(cur, cur_pl.n_workers, cur_pl.n_ps, bs)

    def _restarts(self, cur: Job, cur_pl: Placement | None) -> np.ndarray:
        """Which slots would restart the job (wait: preempt a running job; keep: never)."""
        if cur_pl is None:
            return self._no_restart
        key = (cur_pl.n_workers, cur_pl.n_ps, cur.arch == "ps", cur.mode == "async")
        v = self._restart_sets.get(key)
        if v is None:
            cw, cp, ca, cm = key
            v = ((self._tw != cw) | (self._tp != cp) | (self._ta != ca) | (self._tm != cm)).astype(float)
            v[WAIT], v[KEEP] = 1.0, 0.0
            v = self._restart_sets[key] = v
        return v
