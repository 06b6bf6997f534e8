"""Action masks: which GPUs and sockets can take a job's next task, and
which allocation candidates the heuristic placement can actually place.

A mask never allows an infeasible action: a worker needs a GPU with a free
slot (under ``max_tasks_per_gpu``) that holds no other worker of its job, and
its server's CPU cores and memory; a PS needs its socket's server's cores and
memory; an allocation candidate is allowed only when the placement policy
returns a placement for it that fits what is already decided at this
decision point (``Occupancy.fits``).

Candidates are decided without asking the placement where the answer is
known (``HeuristicFeasibility``); the placement is asked only for the
candidate chosen, and where no rule decides. A decision point's masks:
``CandidateMasks`` at an allocation choice, ``PlacementMasks`` task by task.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, ClusterView
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs.board import Board
from hrlsched.envs.candidates import KEEP, WAIT, CandidateTable
from hrlsched.envs.pricing import CACHE_ENTRIES, Pricing
from hrlsched.policies.placement.balance import BalancePlacement
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.placement.migrate import MigratePlacement
from hrlsched.policies.placement.pack import PackPlacement
from hrlsched.policies.placement.random import RandomPlacement
from hrlsched.policies.tiresias import TiresiasPlacement

EPS = 1e-9


class PartialPlacement:
    """A job being placed task by task (workers first, then PSs); the room
    left is a private copy of the board's, so a deferred job leaves no trace."""

    def __init__(self, board: Board, job: Job, n_workers: int, n_ps: int) -> None:
        self.job = job
        self.prof: ModelProfile = board.profiles[job.model]
        self.n_workers, self.n_ps = int(n_workers), int(n_ps)
        self.gpus: list[int] = []
        self.sockets: list[int] = []
        occ = board.occ
        self.gpu_left = occ.gpu_free.copy()
        self.cores_left = occ.cores_free.copy()
        self.mem_left = occ.mem_free.copy()
        topo = board.topo
        self.topo = topo
        # the job's own tasks so far, counted where the observation shows them
        self.workers_on_server = np.zeros(topo.n_servers, dtype=np.int64)
        self.workers_on_switch = np.zeros(topo.n_switches, dtype=np.int64)
        self.workers_on_socket = np.zeros(topo.n_sockets, dtype=np.int64)
        self.ps_on_socket = np.zeros(topo.n_sockets, dtype=np.int64)
        self.on_server = np.zeros(topo.n_servers, dtype=np.int64)  # workers and PSs

    @property
    def placing_worker(self) -> bool:
        return len(self.gpus) < self.n_workers

    @property
    def complete(self) -> bool:
        return len(self.gpus) == self.n_workers and len(self.sockets) == self.n_ps

    def gpu_mask(self) -> np.ndarray:
        p, t = self.prof, self.topo
        srv_ok = (self.cores_left >= p.worker_cores - EPS) & (self.mem_left >= p.worker_mem_gb - EPS)
        m = (self.gpu_left > 0) & srv_ok[t.gpu_server]
        if self.gpus:
            m[self.gpus] = False  # no two workers of one job on one GPU
        return m

    def narrow_gpu_mask(self, m: np.ndarray, g: int) -> None:
        """``gpu_mask()`` after the worker just put on GPU ``g``, from the mask
        before it (``m``, in place): only GPU ``g`` and the room of its server
        changed, and room only shrinks, so the other entries stay."""
        p, s = self.prof, int(self.topo.gpu_server[g])
        m[g] = False
        if not (self.cores_left[s] >= p.worker_cores - EPS and self.mem_left[s] >= p.worker_mem_gb - EPS):
            m[self.topo.gpu_server == s] = False

    def socket_mask(self) -> np.ndarray:
        p, t = self.prof, self.topo
        srv_ok = (self.cores_left >= p.ps_cores - EPS) & (self.mem_left >= p.ps_mem_gb - EPS)
        return srv_ok[t.socket_server]

    def place_worker(self, g: int) -> int:
        """Put the next worker on GPU ``g``; returns its server."""
        t = self.topo
        s = int(t.gpu_server[g])
        self.gpus.append(int(g))
        self.gpu_left[g] -= 1
        self.cores_left[s] -= self.prof.worker_cores
        self.mem_left[s] -= self.prof.worker_mem_gb
        self.workers_on_server[s] += 1
        self.workers_on_switch[t.gpu_switch[g]] += 1
        self.workers_on_socket[t.gpu_socket[g]] += 1
        self.on_server[s] += 1
        return s

    def place_ps(self, sock: int) -> int:
        """Put the next PS on socket ``sock``; returns its server."""
        s = int(self.topo.socket_server[sock])
        self.sockets.append(int(sock))
        self.cores_left[s] -= self.prof.ps_cores
        self.mem_left[s] -= self.prof.ps_mem_gb
        self.ps_on_socket[sock] += 1
        self.on_server[s] += 1
        return s

    def placement(self) -> Placement:
        return Placement(tuple(self.gpus), tuple(self.sockets))


# What is known of the placements, by exact class (a subclass may place otherwise):
# - FILL: ``place_job`` places any workers the board's worker capacity holds
#   (``Occupancy.worker_capacity``: GPUs with a free slot, cores, memory, per
#   server) and then any PSs that fit, on any socket, in what the workers
#   leave (``Occupancy.ps_sockets_for`` tries every socket), and what it returns fits.
# - FEWEST: its workers span the fewest servers that hold them (largest
#   capacity first: pack's best fit or its largest-first spill, balance's
#   most-free-first).
FILL = (PackPlacement, MigratePlacement, BalancePlacement, RandomPlacement, TiresiasPlacement)


def _fewest(policy: IncrementalPlacement) -> bool:
    if type(policy) is TiresiasPlacement:
        return type(policy._pack) is PackPlacement and type(policy._spread) is BalancePlacement
    return type(policy) in (PackPlacement, MigratePlacement, BalancePlacement)


class HeuristicFeasibility:
    """Which (job, workers, PSs) the heuristic placement policy can place on
    the current board, and its placements, cached until the board changes.

    For the placements of ``FILL`` a candidate is decided without asking the
    policy: all-reduce (no PS) is feasible exactly when the board's worker
    capacity holds its workers; with PSs, it is when, besides, the PS room
    left in the worst case (each worker taking as much of it as a worker can,
    counted with a margin) still holds the PSs; the rare other cases ask the
    policy. Other placements are asked for every candidate."""

    def __init__(self, policy: IncrementalPlacement) -> None:
        self.policy = policy
        self.fill = type(policy) in FILL and (type(policy) is not TiresiasPlacement or _fewest(policy))
        self.fewest = _fewest(policy)
        self.random = type(policy) is RandomPlacement
        self._cache: dict[tuple, object] = {}
        self._room: dict[str, int] = {}
        self._distinct: dict[bytes, tuple[list[int], np.ndarray]] = {}  # ``servers``' worker counts, distinct
        self._spans: dict[tuple, np.ndarray] = {}  # ``servers``' answers, per (histogram, worker counts)
        self._version = -1
        self._board: Board | None = None

    def _sync(self, board: Board) -> None:
        if board is not self._board or board.version != self._version:
            self._cache.clear()
            self._room.clear()
            self._board, self._version = board, board.version

    def capacity(self, board: Board, job: Job) -> np.ndarray:
        """Workers of ``job`` each server can still take (read-only)."""
        return board.occ.worker_capacity(job)

    def worker_room(self, board: Board, job: Job) -> int:
        """Most workers of ``job`` the board can still hold (GPUs with a free
        slot, per server bounded by its CPU cores and memory): a necessary
        condition of any placement, checked before asking the policy."""
        if board is not self._board or board.version != self._version:
            self._sync(board)
        v = self._room.get(job.model)
        if v is None:
            v = self._room[job.model] = board.occ.room(job).total
        return v

    def ps_room(self, board: Board, job: Job) -> tuple[float, float]:
        """(PSs of ``job`` that surely fit in the cluster, most PS room one
        worker can take away): PS room per server is counted with ``board.MARGIN``
        less cores and memory than left, so that sums never depend on rounding."""
        r = board.occ.room(job)
        return r.ps_total, r.per

    def sure(self, board: Board, job: Job, workers: np.ndarray, ps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For (``workers[i]``, ``ps[i]``) pairs of ``job`` (architecture and
        mode aside): which ones the policy surely places (bool per pair), and
        the indices of those no rule decides (ask ``place``). Pairs beyond the
        board's worker room are neither."""
        room = self.worker_room(board, job)
        return self.sure_with(workers, ps, room, *(self.ps_room(board, job) if self.fill else (0.0, 0.0)))

    def sure_one(self, board: Board, job: Job, workers: int, ps: int) -> tuple[bool, bool]:
        """``sure`` of one pair, in Python numbers (numpy calls on one-entry arrays cost more):
        (surely placed, to ask ``place``)."""
        room_ok = workers <= self.worker_room(board, job)
        if not self.fill:
            return False, room_ok
        if not room_ok:
            return False, False
        total, per = self.ps_room(board, job)
        ok = ps == 0 or total - per * workers >= ps
        return ok, not ok

    def sure_with(self, workers: np.ndarray, ps: np.ndarray, room: int, total: float,
                  per: float) -> tuple[np.ndarray, np.ndarray]:
        """``sure`` given the worker room and ``ps_room`` (a pure function of them)."""
        room_ok = workers <= room
        if not self.fill:
            return np.zeros(workers.size, dtype=bool), np.flatnonzero(room_ok)
        ok = room_ok & ((ps == 0) | (total - per * workers >= ps))
        return ok, np.flatnonzero(room_ok & ~ok)

    def servers(self, board: Board, job: Job, workers: np.ndarray) -> np.ndarray | None:
        """Servers the policy's placement of ``workers`` would span (for
        feasible counts): exact for the placements that take the fewest
        servers, the expected number for random GPUs; None when unknown
        (ask ``place``)."""
        if self.fewest:
            # The k roomiest servers, k = 1, 2, ...: a function of how many servers hold each
            # count (the room's histogram), which few commitments change. The answer is kept
            # per histogram and worker counts (the same array again, read-only).
            hist = board.occ.room(job).hist
            wkey = workers.tobytes()
            key = (tuple(hist), wkey)
            out = self._spans.get(key)
            if out is None:
                d = self._distinct.get(wkey)
                if d is None:  # the distinct worker counts (ascending) and where each entry's is
                    uw, inv = np.unique(workers, return_inverse=True)
                    d = self._distinct[wkey] = (uw.tolist(), inv)
                if len(self._spans) > CACHE_ENTRIES:
                    self._spans.clear()
                out = self._spans[key] = np.array(_fewest_servers(hist, d[0]), dtype=np.int64)[d[1]]
                out.flags.writeable = False
            return out
        if self.random:
            # Random GPUs among the free ones of servers with room: a server is
            # missed with the hypergeometric probability C(F - f, w) / C(F, w).
            workers = np.asarray(workers, dtype=np.int64)
            cap = self.capacity(board, job)
            topo = board.topo
            free = np.bincount(topo.gpu_server, weights=board.occ.gpu_free > 0, minlength=topo.n_servers)
            f = np.where(cap > 0, free, 0).astype(np.int64)
            F = int(f.sum())
            lf = _log_factorial(F)
            w = np.minimum(workers, F)[None, :]
            rest = (F - f)[:, None]
            miss = np.where(rest >= w, np.exp(lf[rest] - lf[np.maximum(rest - w, 0)] - lf[F] + lf[F - w]), 0.0)
            return (1.0 - miss).sum(axis=0)
        return None

    def place(self, view: ClusterView, board: Board, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        """The policy's placement of (``job``, ``n_workers``, ``n_ps``) on the
        board, or None where it has none that fits."""
        self._sync(board)
        # Placements depend on the job's profile and architecture, so jobs of one
        # model share them while the board is unchanged.
        key = (job.model, job.arch, job.mode, job.batch_size, n_workers, n_ps)
        if key in self._cache:
            return self._cache[key]  # type: ignore[return-value]
        pl: Placement | None = None
        if n_workers <= self.worker_room(board, job):  # cheap necessary condition first
            pl = self.policy.place_job(view, board.occ, job, n_workers, n_ps)
            if pl is not None and (pl.n_workers != n_workers or pl.n_ps != n_ps or len(set(pl.gpus)) != n_workers
                                   or not (self.fill or board.fits(job, pl))):  # FILL: what it returns fits
                pl = None
        self._cache[key] = pl
        return pl

    def placeable(self, view: ClusterView, board: Board, job: Job, n_workers: int, n_ps: int) -> bool:
        """Whether the policy places (``job``, ``n_workers``, ``n_ps``) on the
        board: by the rules where they decide, else asked."""
        ok, ask = self.sure_one(board, job, n_workers, n_ps)
        if ok:
            return True
        return ask and self.place(view, board, job, n_workers, n_ps) is not None


class SlotRules(NamedTuple):
    """What the rules decide of a job's menu slots, given its menu and the
    room (read-only, shared by the choices they decide): ``sure``: wait and
    the slots the rules allow; ``kept``: those and keep; ``ask``: the slots
    no rule decides (ask the placement); the masks' bytes (cache keys)."""

    sure: np.ndarray
    kept: np.ndarray
    ask: list[int]
    sure_key: bytes
    kept_key: bytes


class ValidSlots(NamedTuple):
    """A set of valid slots (read-only): bool per slot and its bytes (a
    cache key), as a list and an index array (ascending), and the action
    mask that allows them."""

    valid: np.ndarray
    key: bytes
    idx: list[int]
    ix: np.ndarray
    mask: np.ndarray


class CandidateMasks:
    """The valid menu slots of a job at an allocation choice: wait; keep
    where its running placement fits the board; the slots open to it (its
    architecture and mode, or any where it leaves them open; no repeat) that
    the heuristic placement places on what is left (``HeuristicFeasibility``:
    by the rules where they decide, else asked) and, where the predictor
    does not price every allocation, that it prices (``pricing``)."""

    def __init__(self, table: CandidateTable, n_actions: int, feas: HeuristicFeasibility, pricing: Pricing) -> None:
        self.table = table
        self.n_actions = n_actions
        self.feas = feas
        self.pricing = pricing
        self.min_workers = int(table.workers[table.workers > 0].min())
        self._slot_sets: dict[tuple, np.ndarray] = {}
        self._menu_ps: dict[tuple, bool] = {}
        self._menu_most: dict[tuple, int] = {}  # most workers of a menu's slots
        self._ps_most: dict[tuple, float] = {}  # most PS room a menu's slot needs, per PS room one worker takes
        self._slot_rules: dict[tuple, SlotRules] = {}  # per (menu, room)
        self._valid_sets: dict[bytes, ValidSlots] = {}

    def caches(self) -> tuple[dict, ...]:
        return (self._slot_sets, self._menu_ps, self._menu_most, self._ps_most, self._slot_rules, self._valid_sets)

    def slots(self, cur: Job, base: Job) -> np.ndarray:
        """The menu's slots open to a job (its architecture and mode, or any
        where open; ``base``: the job as first seen)."""
        key = (cur.arch, cur.mode, base.arch_open, base.mode_open)
        v = self._slot_sets.get(key)
        if v is None:
            t = self.table
            v = self._slot_sets[key] = np.flatnonzero(
                (t.workers > 0) & ~t.duplicate
                & ((t.arch == ARCHS.index(cur.arch)) | base.arch_open)
                & ((t.mode == MODES.index(cur.mode)) | base.mode_open)
            )
        return v

    def _slots_with_ps(self, menu: tuple) -> bool:
        """Whether any slot open to a job of ``menu`` (arch, mode, arch open, mode open) has a PS."""
        v = self._menu_ps.get(menu)
        if v is None:
            arch, mode, arch_open, mode_open = menu
            t = self.table
            slots = np.flatnonzero((t.workers > 0) & ~t.duplicate & ((t.arch == ARCHS.index(arch)) | arch_open)
                                   & ((t.mode == MODES.index(mode)) | mode_open))
            v = self._menu_ps[menu] = bool(np.any(t.ps[slots] > 0))
        return v

    def forced(self, board: Board, job: Job, pl: Placement | None) -> bool:
        """``job`` (running at ``pl``, or None) surely has no choice but to
        wait: no room for the menu's smallest worker count, and it cannot
        keep its placement."""
        if self.feas.worker_room(board, job) >= self.min_workers:
            return False
        return pl is None or not board.fits(job, pl)

    def valid(self, view: ClusterView, board: Board, k: int) -> ValidSlots:
        """The valid slots of job ``k`` of ``view`` on ``board``."""
        t, feas = self.table, self.feas
        cur = view.jobs[k]
        cur_pl = view.placements[k]
        base = self.pricing.workload.base_jobs[cur.job_id]
        keep = cur_pl is not None and board.fits(cur, cur_pl)
        # The slots the rules decide depend on the job's menu, the room and the PS room only
        # (not on the PS room where the menu's open slots have no PS).
        room = feas.worker_room(board, cur)  # workers use the same resources in every variant
        menu = (cur.arch, cur.mode, base.arch_open, base.mode_open)
        # The rules compare the room with each slot's workers, and the PS room left with each
        # slot's PSs: beyond the menu's largest need, more room decides the same, so the key
        # holds the room up to that need (more choices find their rules already made).
        most = self._menu_most.get(menu)
        if most is None:
            slots = self.slots(cur, base)
            most = self._menu_most[menu] = int(t.workers[slots].max()) if slots.size else 0
        room = min(room, most)
        if feas.fill and self._slots_with_ps(menu):
            total, per = feas.ps_room(board, cur)
            need = self._ps_most.get((menu, per))
            if need is None:  # integers (``per`` is): exact
                slots = self.slots(cur, base)
                need = self._ps_most[(menu, per)] = float(np.max(t.ps[slots] + per * t.workers[slots])) \
                    if slots.size else 0.0
            key = (*menu, room, min(total, need), per)
        else:
            key = (*menu, room)
        v = self._slot_rules.get(key)
        if v is None:
            slots = self.slots(cur, base)
            ok, ask = feas.sure_with(t.workers[slots], t.ps[slots], room, *(key[5:] if len(key) > 5 else (0.0, 0.0)))
            sure = np.zeros(t.size, dtype=bool)  # wait, and the slots the rules allow (keep apart)
            sure[WAIT] = True
            sure[slots[ok]] = True
            kept = sure.copy()
            kept[KEEP] = True
            sure.flags.writeable = kept.flags.writeable = False  # shared by the choices they decide
            v = self._slot_rules[key] = SlotRules(sure, kept, slots[ask].tolist(), sure.tobytes(), kept.tobytes())
        sure, kept, ask, sure_key, kept_key = v
        if not ask and view.perf.prices_everything:  # the rules decide every slot
            valid, vk = (kept, kept_key) if keep else (sure, sure_key)
        else:
            valid = (kept if keep else sure).copy()
            for c in ask:
                job = self.pricing.slot_job(cur, c)
                valid[c] = feas.place(view, board, job, int(t.workers[c]), int(t.ps[c])) is not None
            if not view.perf.prices_everything:  # slots the predictor cannot price cannot run either
                valid[2:] &= self.pricing.slot_speeds(cur, int(view.batch_sizes[k]), valid)[2:] > 0
            vk = valid.tobytes()
        vs = self._valid_sets.get(vk)
        if vs is None:
            valid.flags.writeable = False
            ix = np.flatnonzero(valid)
            m = np.zeros(self.n_actions, dtype=np.int8)
            m[: t.size] = valid
            vs = self._valid_sets[vk] = ValidSlots(valid, vk, ix.tolist(), ix, m)
        return vs


class PlacementMasks:
    """The action masks of a placement phase: the GPUs that can take the
    job's next worker, else the sockets that can take its next PS; *defer*
    alone at a dead end (the job waits). Actions: ``place_off`` + GPU, then
    ``place_off + max_gpus`` + socket index, then *defer*."""

    def __init__(self, n_actions: int, place_off: int, max_gpus: int, defer_action: int, topo: Topology) -> None:
        self.n_actions, self.place_off, self.max_gpus, self.defer_action = n_actions, place_off, max_gpus, defer_action
        self.n_gpus, self.n_sockets = topo.n_gpus, topo.n_sockets

    def first(self, part: PartialPlacement) -> np.ndarray:
        """The mask of ``part``'s next task."""
        m = np.zeros(self.n_actions, dtype=np.int8)
        o = self.place_off
        if part.placing_worker:
            m[o:o + self.n_gpus] = part.gpu_mask()
        else:
            m[o + self.max_gpus:o + self.max_gpus + self.n_sockets] = part.socket_mask()
        if not np.count_nonzero(m):
            m[self.defer_action] = 1  # a dead end: the job waits
        return m

    def after_worker(self, last: np.ndarray, part: PartialPlacement, g: int) -> np.ndarray:
        """The mask of ``part``'s next worker, from the ``last`` one's (GPU ``g``
        taken since), narrowed where the worker went."""
        m = last.copy()
        part.narrow_gpu_mask(m[self.place_off:self.place_off + self.n_gpus], g)
        if not np.count_nonzero(m):
            m[self.defer_action] = 1  # a dead end: the job waits
        return m


def _fewest_servers(hist: list[int], counts: list[int]) -> list[int]:
    """For each worker count of ``counts`` (ascending), how many servers hold
    it, the roomiest first, where ``hist[c]`` servers can take c workers:
    the first k whose capacities sum to the count at least (1 for a count of
    0 or less; one more than the servers when they cannot hold it), as a
    ``searchsorted`` on the cumulative capacities, walked run by run."""
    out: list[int] = []
    acc = used = 0  # capacity and servers taken so far
    c = len(hist) - 1  # the capacity of the run being taken
    left = hist[c] if c > 0 else 0  # its servers not taken yet
    for w in counts:
        while acc < w and c > 0:
            if left == 0:
                c -= 1
                left = hist[c] if c > 0 else 0
                continue
            n = min(left, -(-(w - acc) // c))
            acc += n * c
            used += n
            left -= n
        out.append(max(used, 1) if acc >= w else sum(hist) + 1)
    return out


_LOG_FACT: list[np.ndarray] = [np.zeros(1)]


def _log_factorial(n: int) -> np.ndarray:
    """log k! for k = 0..n (a table grown on demand)."""
    if _LOG_FACT[0].size <= n:
        _LOG_FACT[0] = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, 2 * n + 2)))])
    return _LOG_FACT[0]
