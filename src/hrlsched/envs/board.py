"""The board of one decision point: what is already decided (placements
committed job after job) and the room left, kept incrementally so that each
sub-step updates only what its commitment changed."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.placement.occupancy import Occupancy

MARGIN = 1e-6  # PS room counted with this much less core/memory, so rounding never matters
_EXACT = 2.0**50  # PS counts summed as integers only below this (float sums of integers are exact there)

LINK_KINDS = ("pcie", "switch", "qpi", "nic", "rack", "nvlink")


def link_layout(topo: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The physical links, in the analytic model's order: each GPU's PCIe link,
    each switch uplink, each server's QPI, NIC, each rack uplink, each
    server's NVLink fabric. Returns (offsets of the kinds, kind per link,
    capacity per link in Gbit/s)."""
    G, S, V, R = topo.n_gpus, topo.n_switches, topo.n_servers, topo.n_racks
    sizes = np.array([G, S, V, V, R, V])
    off = np.concatenate([[0], np.cumsum(sizes)])
    kind = np.repeat(np.arange(len(sizes)), sizes)
    rack_cap = topo.rack_uplink_gbps if topo.rack_uplink_gbps.size == R else np.zeros(R)
    cap = np.concatenate([topo.pcie_gbps, topo.switch_uplink_gbps, topo.qpi_gbps, topo.nic_gbps, rack_cap,
                          topo.nvlink_gbps * np.maximum(topo.server_gpus, 1)]).astype(float)
    return off, kind, cap


def crossed_links(topo: Topology, off: np.ndarray, pl: Placement) -> np.ndarray:
    """Links a job's traffic crosses at a placement, from the topology alone:
    each worker's PCIe link; the uplinks of its switches when it has tasks
    beyond one switch (or any PS); the QPI of a server where its tasks use
    both sockets; the NICs of its servers and the uplinks of its racks when it
    spans several; the NVLink fabric of a server holding two of its workers."""
    g = np.asarray(pl.gpus, dtype=np.int64)
    s = np.asarray(pl.ps_sockets, dtype=np.int64)
    sw = np.unique(topo.gpu_switch[g])
    socks = np.concatenate([topo.gpu_socket[g], s])
    srv_of = topo.socket_server[socks]
    servers = np.unique(srv_of)
    racks = np.unique(topo.server_rack[servers])
    out = [off[0] + g]
    if sw.size > 1 or s.size:
        out.append(off[1] + sw)
    us = np.unique(socks)
    per_srv = np.bincount(topo.socket_server[us], minlength=topo.n_servers)
    out.append(off[2] + np.flatnonzero(per_srv > 1))
    if servers.size > 1:
        out.append(off[3] + servers)
    if racks.size > 1:
        out.append(off[4] + racks)
    wsrv = np.bincount(topo.gpu_server[g], minlength=topo.n_servers)
    out.append(off[5] + np.flatnonzero((wsrv > 1) & (topo.nvlink_gbps > 0)))
    return np.concatenate(out)


class _Occupancy(Occupancy):
    """``Occupancy`` with profiles looked up once per model, whose ``commit``
    and ``release`` go task by task over the placement's ``PlacementIndex``
    entry (the same subtractions, in the same order, as ``np.subtract.at``)
    and keep the GPUs with a free slot per server up to date."""

    def __init__(self, view: ClusterView, max_tasks_per_gpu: int, profiles: Mapping[str, ModelProfile],
                 index: PlacementIndex | None = None) -> None:
        super().__init__(view, max_tasks_per_gpu)
        self._profiles = profiles
        self._index = index
        self._n_free: int | None = None  # GPUs with a free slot, once counted
        self._gpu_server = index._server if index is not None else view.topology.gpu_server.tolist()
        # Servers whose room changed, in order, since the last wholesale change
        # (``forget``): a model's ``ModelRoom`` catches up on them alone.
        self._log: list[int] = []
        self._bulk = 0
        # one room per resource need (a worker's and a PS's cores and memory): the room depends on
        # nothing else of a model, and models share needs (8 models, 3 needs in the scenarios)
        self._rooms: dict[tuple[float, float, float, float], ModelRoom] = {}
        self._need: dict[str, tuple[float, float, float, float]] = {}  # per model
        # a ``ModelRoom.hist``'s length: the most GPUs of a server, plus one (once per board, not per model)
        topo = self.topo
        self.hist_len = (max(int(topo.server_gpus.max()), 0) if topo.n_servers else 0) + 1

    def profile(self, job: Job) -> ModelProfile:
        return self._profiles[job.model]

    def forget(self) -> None:
        super().forget()
        self._n_free = None
        self._bulk += 1
        self._log.clear()

    def room(self, job: Job) -> ModelRoom:
        """The room of ``job``'s model (of every model with its resource needs), up to date (read-only)."""
        need = self._need.get(job.model)
        if need is None:
            p = self._profiles[job.model]
            need = self._need[job.model] = (p.worker_cores, p.worker_mem_gb, p.ps_cores, p.ps_mem_gb)
        r = self._rooms.get(need)
        if r is None:
            r = self._rooms[need] = ModelRoom(self, self._profiles[job.model], job)
        elif r.pos == len(self._log) and r.bulk == self._bulk and r._exact:  # up to date (``sync``'s no-op)
            return r
        r.sync(self)
        return r

    def worker_capacity(self, job: Job, reserve_ps: int = 0) -> np.ndarray:
        """``Occupancy.worker_capacity``; with no PS reserved, from the
        model's ``ModelRoom`` (the same values, kept up to date server by
        server) rather than the 128-server array formulas again after each
        commitment."""
        if reserve_ps != 0 or self._index is None:  # (without the index, ``_apply`` keeps no log)
            return super().worker_capacity(job, reserve_ps)
        key = (job.model, 0)
        cap = self._capacity.get(key)
        if cap is None:
            cap = self._capacity[key] = np.array(self.room(job).cap, dtype=np.int64)
            cap.flags.writeable = False
        return cap

    def worker_total(self, job: Job) -> int:
        if self._index is None:
            return super().worker_total(job)
        return self.room(job).total

    def fullest_fit(self, job: Job, n_workers: int, reserve_ps: int = 0) -> int:
        """``Occupancy.fullest_fit`` from the model's ``ModelRoom``: the
        servers of the least capacity that fits come first in the histogram,
        and in index order by ``list.index``; the PS reserve is checked
        server by server (the array formula on one element) for the first few
        candidates, the arrays are used beyond them."""
        if self._index is None:
            return super().fullest_fit(job, n_workers, reserve_ps)
        room = self.room(job)
        hist, cap = room.hist, room.cap
        sizes = [c for c in range(max(n_workers, 0), len(hist)) if hist[c]]
        if not sizes:
            return -1
        if not reserve_ps:
            return cap.index(sizes[0])
        prof = room.prof
        fg, cores, mem = self._free_gpus, self.cores_free, self.mem_free
        assert fg is not None  # counted by ``ModelRoom``, kept by ``_apply``
        rc, rm = reserve_ps * prof.ps_cores, reserve_ps * prof.ps_mem_gb
        wdiv, mdiv = room._wdiv, room._mdiv
        floor = math.floor
        checks = 0
        for c in sizes:
            s = -1
            for _ in range(hist[c]):
                s = cap.index(c, s + 1)
                checks += 1
                if checks > 16:  # a long search: the arrays' answer
                    return super().fullest_fit(job, n_workers, reserve_ps)
                k = max(min(fg.item(s), floor(min((cores.item(s) - rc) / wdiv, (mem.item(s) - rm) / mdiv) + 1e-9)), 0)
                if k >= n_workers:
                    return s
        return cap.index(sizes[0])

    def free_count(self) -> int:
        """GPUs with a free slot (kept up to date by ``commit`` and ``release``)."""
        if self._n_free is None:
            self._n_free = int(np.count_nonzero(self.gpu_free > 0))
        return self._n_free

    def commit(self, job: Job, pl: Placement) -> None:
        self._apply(job, pl, -1)

    def release(self, job: Job, pl: Placement) -> None:
        self._apply(job, pl, 1)

    def _apply(self, job: Job, pl: Placement, sign: int) -> None:
        if self._index is None:
            (super().commit if sign < 0 else super().release)(job, pl)
            return
        x = self._index.get(pl)
        prof = self._profiles[job.model]
        self._capacity.clear()
        free, fg, srv_of = self.gpu_free, self._free_gpus, self._gpu_server
        for g, c in x.per_gpu:
            before = int(free[g])
            after = before + sign * c
            free[g] = after
            if (before > 0) != (after > 0):
                if fg is not None:
                    fg[srv_of[g]] += 1.0 if after > 0 else -1.0
                if self._n_free is not None:
                    self._n_free += 1 if after > 0 else -1
        cores, mem = self.cores_free, self.mem_free
        wc, wm, pc, pm = prof.worker_cores, prof.worker_mem_gb, prof.ps_cores, prof.ps_mem_gb
        ps = x.ps.size > 0
        log = self._log
        for v, w, p in x.per_server:  # one subtraction (addition) per task, workers first, as ``np.subtract.at``
            log.append(v)
            c, m = float(cores[v]), float(mem[v])
            if sign < 0:
                for _ in range(w):
                    c -= wc
                    m -= wm
                if ps:
                    for _ in range(p):
                        c -= pc
                        m -= pm
            else:
                for _ in range(w):
                    c += wc
                    m += wm
                if ps:
                    for _ in range(p):
                        c += pc
                        m += pm
            cores[v], mem[v] = c, m


class ModelRoom:
    """The room of one model on a board, kept up to date server by server:
    workers each server can take (``cap``, ``Occupancy.worker_capacity``),
    their sum (``total``) and how many servers can take c workers
    (``hist[c]``); PSs each server surely takes (``HeuristicFeasibility.ps_room``'s
    count, ``ps``) and their sum (``ps_total``). A commitment changes a
    handful of servers, so catching up on them in Python beats recomputing the
    128-server arrays with numpy; the per-server values are the same IEEE
    operations as the arrays', and the sums are of integers, so the results are
    exactly those of the arrays."""

    def __init__(self, occ: _Occupancy, prof: ModelProfile, job: Job) -> None:
        self.prof, self.job = prof, job
        self.bulk = -1
        self.pos = 0
        self.cap: list[int] = []
        self.hist: list[int] = []
        self.total = 0
        self.ps: list[float] = []
        self.ps_total = 0.0
        wc, wm, pc, pm = prof.worker_cores, prof.worker_mem_gb, prof.ps_cores, prof.ps_mem_gb
        self._wdiv, self._mdiv = max(wc, 1e-9), max(wm, 1e-9)
        per = 0.0
        for need, use in ((pc, wc), (pm, wm)):
            if need > 0:
                per = max(per, math.ceil(use / need) if use > 0 else 0)
        self.per = float(per)
        self._ps_needs = (pc if pc > 0 else None, pm if pm > 0 else None)
        self._exact = True  # PS counts small enough to be summed as integers

    def sync(self, occ: _Occupancy) -> None:
        log = occ._log
        if self.bulk != occ._bulk or not self._exact or len(log) - self.pos > 64:
            self._full(occ)
        elif len(log) > self.pos:
            self._servers(occ, set(log[self.pos:]))
            if not self._exact:
                self._full(occ)
        self.pos = len(log)

    def _full(self, occ: _Occupancy) -> None:
        cap = occ._worker_capacity(self.job, 0)  # also counts the free GPUs per server
        self.cap = cap.tolist()
        self.hist = np.bincount(cap, minlength=occ.hist_len).tolist()
        self.total = sum(self.cap)  # Python ints: no numpy call
        self.bulk = occ._bulk
        p = self.prof
        k: np.ndarray | None = None
        for left, need in ((occ.cores_free, p.ps_cores), (occ.mem_free, p.ps_mem_gb)):
            if need > 0:
                x = np.floor((left - MARGIN) / need)
                k = x if k is None else np.minimum(k, x, out=x)
        if k is None:
            k = np.full(occ.cores_free.shape, np.inf)
        k = np.maximum(k, 0)
        self.ps_total = float(k.sum())
        # Each count is >= 0 and a float sum of such values is at least each of them, so a total
        # below _EXACT puts every count below it (NaN or inf fail the comparison).
        self._exact = self.ps_total < _EXACT
        self.ps = k.tolist()

    def _servers(self, occ: _Occupancy, servers: set[int]) -> None:
        """The values of ``servers`` again (the arrays' formulas, on one
        element; the loop over them inlined, with what it reads as locals)."""
        cores, mem, fg = occ.cores_free, occ.mem_free, occ._free_gpus  # ``fg``: counted by ``_full``, kept by ``_apply``
        assert fg is not None
        wdiv, mdiv = self._wdiv, self._mdiv
        cap, hist, ps = self.cap, self.hist, self.ps
        pc, pm = self._ps_needs  # each > 0, or None (``_exact``: at least one)
        floor = math.floor
        total, ps_total = self.total, self.ps_total
        for v in servers:
            cf, mf = cores.item(v), mem.item(v)
            c = int(max(min(fg.item(v), floor(min(cf / wdiv, mf / mdiv) + 1e-9)), 0))
            old = cap[v]
            if c != old:
                cap[v] = c
                hist[old] -= 1
                hist[c] += 1
                total += c - old
            if pc is None:
                k = floor((mf - MARGIN) / pm)
            else:
                k = floor((cf - MARGIN) / pc)
                if pm is not None:
                    k = min(k, floor((mf - MARGIN) / pm))
            k = float(max(k, 0))
            if k >= _EXACT:
                self._exact = False  # ``sync`` recomputes the arrays
                break
            ps_total += k - ps[v]  # integers: exact
            ps[v] = k
        self.total, self.ps_total = total, ps_total


class Indexed:
    """What the board reads of one placement: its GPUs and PS sockets (index
    arrays), the links it crosses (``crossed_links``' set, sorted), its
    (GPU, workers) pairs and its (server, workers, PSs) triples (lists, in
    server order)."""

    __slots__ = ("gpus", "ps", "links", "per_gpu", "per_server")

    def __init__(self, gpus: np.ndarray, ps: np.ndarray, links: np.ndarray, per_gpu: list[tuple[int, int]],
                 per_server: list[tuple[int, int, int]]) -> None:
        self.gpus, self.ps, self.links, self.per_gpu, self.per_server = gpus, ps, links, per_gpu, per_server


_INDEX_ENTRIES = 65536  # placements a ``PlacementIndex`` keeps (each way) before it starts again


class PlacementIndex:
    """What the board needs of a placement, computed once per placement
    (an episode sees the same placements again and again): its GPUs and
    their servers, its PS servers, the links it crosses. A placement has a
    handful of tasks, so this is Python over them, with the topology as lists."""

    def __init__(self, topo: Topology, link_off: np.ndarray) -> None:
        self.topo = topo
        self.link_off = [int(x) for x in link_off]
        self._switch = topo.gpu_switch.tolist()
        self._socket = topo.gpu_socket.tolist()
        self._server = topo.gpu_server.tolist()
        self._sock_server = topo.socket_server.tolist()
        self._rack = topo.server_rack.tolist()
        self._nvlink = (np.broadcast_to(topo.nvlink_gbps, (topo.n_servers,)) > 0).tolist()
        self._cache: dict[Placement, Indexed] = {}
        self._by_id: dict[int, tuple[Placement, Indexed]] = {}

    def clear(self) -> None:
        self._cache.clear()
        self._by_id.clear()

    def get(self, pl: Placement) -> Indexed:
        """The placement's ``Indexed`` entry (made once)."""
        e = self._by_id.get(id(pl))  # the same object again (the view's placements): no hashing
        if e is not None and e[0] is pl:
            return e[1]
        v = self._cache.get(pl)
        if v is None:
            if len(self._cache) > _INDEX_ENTRIES:  # (a long episode, or the learned placement's candidates)
                self._cache.clear()
            v = self._cache[pl] = self._make(pl)
        if len(self._by_id) > _INDEX_ENTRIES:
            self._by_id.clear()
        self._by_id[id(pl)] = (pl, v)  # holds ``pl``, so its id is not reused while it is here
        return v

    def spanned(self, pl: Placement) -> int:
        """Servers holding workers of ``pl``."""
        return sum(1 for _, w, _ in self.get(pl).per_server if w)

    def _make(self, pl: Placement) -> Indexed:
        gpus, socks = pl.gpus, pl.ps_sockets
        per_gpu: dict[int, int] = {}
        per_srv_w: dict[int, int] = {}
        per_srv_p: dict[int, int] = {}
        for g in gpus:
            per_gpu[g] = per_gpu.get(g, 0) + 1
            v = self._server[g]
            per_srv_w[v] = per_srv_w.get(v, 0) + 1
        for x in socks:
            v = self._sock_server[x]
            per_srv_p[v] = per_srv_p.get(v, 0) + 1
        srv = sorted(per_srv_w.keys() | per_srv_p.keys()) if per_srv_p else sorted(per_srv_w)
        return Indexed(np.array(gpus, dtype=np.int64), np.array(socks, dtype=np.int64),
                       self._links(gpus, socks, per_gpu, per_srv_w), list(per_gpu.items()),
                       [(v, per_srv_w.get(v, 0), per_srv_p.get(v, 0)) for v in srv])

    def _links(self, gpus: tuple[int, ...], ps: tuple[int, ...], per_gpu: dict[int, int],
               workers_on: dict[int, int]) -> np.ndarray:
        """``crossed_links``, as a set of link indices (in another order); ``per_gpu``,
        ``workers_on``: the workers per GPU and per server, as ``_make`` counted them."""
        off = self.link_off
        switches = {self._switch[g] for g in gpus}
        socks = [self._socket[g] for g in gpus] + list(ps)
        servers = {self._sock_server[x] for x in socks}
        out = [off[0] + g for g in per_gpu]  # the distinct GPUs
        if len(switches) > 1 or ps:
            out += [off[1] + w for w in switches]
        sockets_on: dict[int, int] = {}
        for x in set(socks):
            v = self._sock_server[x]
            sockets_on[v] = sockets_on.get(v, 0) + 1
        out += [off[2] + v for v, c in sockets_on.items() if c > 1]
        if len(servers) > 1:
            out += [off[3] + v for v in servers]
            racks = {self._rack[v] for v in servers}
            if len(racks) > 1:
                out += [off[4] + r for r in racks]
        out += [off[5] + v for v, c in workers_on.items() if c > 1 and self._nvlink[v]]
        return np.array(sorted(out), dtype=np.int64)


class Board:
    """Room left and counts of what is decided at one decision point."""

    def __init__(self, view: ClusterView, max_tasks_per_gpu: int, profiles: Mapping[str, ModelProfile],
                 link_off: np.ndarray, index: PlacementIndex | None = None) -> None:
        topo = view.topology
        self.topo = topo
        self.profiles = profiles
        self.index = index if index is not None else PlacementIndex(topo, link_off)
        self.occ = _Occupancy(view, max_tasks_per_gpu, profiles, self.index)
        self.gpu_workers = np.zeros(topo.n_gpus, dtype=np.int64)  # workers decided on each GPU
        self.socket_ps = np.zeros(topo.n_sockets, dtype=np.int64)  # PSs decided on each socket
        self.link_jobs = np.zeros(int(link_off[-1]), dtype=np.int64)  # decided jobs crossing each link
        self.link_off = link_off
        self.version = 0  # bumped at each commitment (caches of feasibility key on it)

    def commit(self, job: Job, pl: Placement) -> None:
        x = self.index.get(pl)
        self.occ.commit(job, pl)
        gw = self.gpu_workers
        for g, c in x.per_gpu:
            gw[g] += c
        if x.ps.size:
            sp = self.socket_ps
            for s in pl.ps_sockets:
                sp[s] += 1
        self.link_jobs[x.links] += 1
        self.version += 1

    def commit_kept(self, jobs: list[Job], pls: list[Placement],
                    loads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> bool:
        """Commit the running jobs that keep their placements, all at once, if
        they fit together (they do when the board is fresh: the engine ran
        them together); False (nothing committed) otherwise. ``loads``: the
        workers per GPU, cores and memory per server of these placements,
        where the caller has them as these sums would give them (the engine's
        loads, when these are all its running jobs and every figure is a
        whole number: sums exact in any order)."""
        if not pls:
            return True
        occ, topo = self.occ, self.topo
        idx = [self.index.get(pl) for pl in pls]
        s = np.concatenate([x.ps for x in idx])
        if loads is not None:
            tasks, cores, mem = loads
            if np.any(tasks > occ.gpu_free):
                return False
        else:
            g = np.concatenate([x.gpus for x in idx])
            tasks = np.bincount(g, minlength=topo.n_gpus)
            if np.any(tasks > occ.gpu_free):
                return False
            profiles = self.profiles
            res = np.array([self._res(profiles[j.model]) for j in jobs])  # per job: worker cores, memory, PS cores, memory
            wl = np.array([x.gpus.size for x in idx])
            pl_ = np.array([x.ps.size for x in idx])
            gs, ss = topo.gpu_server[g], topo.socket_server[s]
            V = topo.n_servers
            wr, pr = np.repeat(res[:, :2], wl, axis=0), np.repeat(res[:, 2:], pl_, axis=0)
            cores = np.bincount(gs, weights=wr[:, 0], minlength=V) + np.bincount(ss, weights=pr[:, 0], minlength=V)
            mem = np.bincount(gs, weights=wr[:, 1], minlength=V) + np.bincount(ss, weights=pr[:, 1], minlength=V)
        if np.any(cores > occ.cores_free + 1e-9) or np.any(mem > occ.mem_free + 1e-9):
            return False
        occ.gpu_free -= tasks  # as Occupancy.commit_many, with the loads just summed
        occ.cores_free -= cores
        occ.mem_free -= mem
        occ.forget()
        self.gpu_workers += tasks
        self.socket_ps += np.bincount(s, minlength=topo.n_sockets)
        self.link_jobs += np.bincount(np.concatenate([x.links for x in idx]), minlength=self.link_jobs.size)
        self.version += 1
        return True

    @staticmethod
    def _res(p: ModelProfile) -> tuple[float, float, float, float]:
        return (p.worker_cores, p.worker_mem_gb, p.ps_cores, p.ps_mem_gb)

    def reserve(self, jobs: list[Job], pls: list[Placement]) -> None:
        """Hold the room of running jobs not decided yet (their GPUs, cores and
        memory), so that the jobs decided before them cannot take it; the
        counts of what is decided do not change. ``release`` gives a job's
        room back when it comes to be decided."""
        if pls:
            self.occ.commit_many(jobs, pls)
            self.version += 1

    def release(self, job: Job, pl: Placement) -> None:
        self.occ.release(job, pl)
        self.version += 1

    def fits(self, job: Job, pl: Placement) -> bool:
        """``Occupancy.fits``, looking only at the GPUs and servers ``pl`` uses."""
        x = self.index.get(pl)
        occ = self.occ
        free = occ.gpu_free
        for g, c in x.per_gpu:
            if free[g] < c:
                return False
        prof = self.profiles[job.model]
        wc, wm, pc, pm = prof.worker_cores, prof.worker_mem_gb, prof.ps_cores, prof.ps_mem_gb
        cores, mem = occ.cores_free, occ.mem_free
        ps = x.ps.size > 0
        for v, w, p in x.per_server:
            c, m = w * wc, w * wm
            if ps:
                c, m = c + p * pc, m + p * pm
            if not (c <= cores[v] + 1e-9 and m <= mem[v] + 1e-9):
                return False
        return True

    def free_slots(self) -> int:
        """GPUs with a free slot."""
        return self.occ.free_count()
