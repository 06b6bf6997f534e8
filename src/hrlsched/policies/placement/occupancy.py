"""Free capacity while a placement policy fills the cluster, job after job."""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement


class Occupancy:
    """GPU slots, CPU cores and memory left, updated as jobs are placed."""

    def __init__(self, view: ClusterView, max_tasks_per_gpu: int = 1) -> None:
        topo = view.topology
        self.view = view
        self.topo = topo
        self.gpu_free = np.full(topo.n_gpus, max_tasks_per_gpu, dtype=np.int64)
        self.cores_free = topo.server_cores.astype(float).copy()
        self.mem_free = topo.server_mem_gb.astype(float).copy()
        self._capacity: dict[tuple[str, int], np.ndarray] = {}  # worker_capacity until the next commit
        self._free_gpus: np.ndarray | None = None
        self._lists: tuple[list[int], list[int]] | None = None  # the topology's socket of each GPU, server of each socket

    def profile(self, job: Job) -> ModelProfile:
        return self.view.perf.profile(job)

    def commit(self, job: Job, pl: Placement) -> None:
        self.forget()
        topo, prof = self.topo, self.profile(job)
        g = np.asarray(pl.gpus, dtype=np.int64)
        np.subtract.at(self.gpu_free, g, 1)
        srv = topo.gpu_server[g]
        np.subtract.at(self.cores_free, srv, prof.worker_cores)
        np.subtract.at(self.mem_free, srv, prof.worker_mem_gb)
        if pl.ps_sockets:
            ps_srv = topo.socket_server[np.asarray(pl.ps_sockets, dtype=np.int64)]
            np.subtract.at(self.cores_free, ps_srv, prof.ps_cores)
            np.subtract.at(self.mem_free, ps_srv, prof.ps_mem_gb)

    def release(self, job: Job, pl: Placement) -> None:
        """Undo ``commit`` of ``job`` at ``pl``."""
        self.forget()
        topo, prof = self.topo, self.profile(job)
        g = np.asarray(pl.gpus, dtype=np.int64)
        np.add.at(self.gpu_free, g, 1)
        srv = topo.gpu_server[g]
        np.add.at(self.cores_free, srv, prof.worker_cores)
        np.add.at(self.mem_free, srv, prof.worker_mem_gb)
        if pl.ps_sockets:
            ps_srv = topo.socket_server[np.asarray(pl.ps_sockets, dtype=np.int64)]
            np.add.at(self.cores_free, ps_srv, prof.ps_cores)
            np.add.at(self.mem_free, ps_srv, prof.ps_mem_gb)

    def commit_many(self, jobs: list[Job], pls: list[Placement]) -> None:
        """``commit`` for many jobs at once (the running jobs kept in place)."""
        if not pls:
            return
        self.forget()
        topo = self.topo
        profs = [self.profile(j) for j in jobs]
        wl = np.fromiter((p.n_workers for p in pls), dtype=np.int64, count=len(pls))
        pl_ = np.fromiter((p.n_ps for p in pls), dtype=np.int64, count=len(pls))
        g = np.fromiter((x for p in pls for x in p.gpus), dtype=np.int64, count=int(wl.sum()))
        s = np.fromiter((x for p in pls for x in p.ps_sockets), dtype=np.int64, count=int(pl_.sum()))
        wc = np.repeat([p.worker_cores for p in profs], wl)
        wm = np.repeat([p.worker_mem_gb for p in profs], wl)
        pc = np.repeat([p.ps_cores for p in profs], pl_)
        pm = np.repeat([p.ps_mem_gb for p in profs], pl_)
        ns = topo.n_servers
        self.gpu_free -= np.bincount(g, minlength=topo.n_gpus)
        gs, ss = topo.gpu_server[g], topo.socket_server[s]
        self.cores_free -= np.bincount(gs, weights=wc, minlength=ns) + np.bincount(ss, weights=pc, minlength=ns)
        self.mem_free -= np.bincount(gs, weights=wm, minlength=ns) + np.bincount(ss, weights=pm, minlength=ns)

    def fits(self, job: Job, pl: Placement) -> bool:
        topo, prof = self.topo, self.profile(job)
        g = np.asarray(pl.gpus, dtype=np.int64)
        if np.any(np.bincount(g, minlength=topo.n_gpus) > self.gpu_free):
            return False
        cores = np.bincount(topo.gpu_server[g], minlength=topo.n_servers) * prof.worker_cores
        mem = np.bincount(topo.gpu_server[g], minlength=topo.n_servers) * prof.worker_mem_gb
        if pl.ps_sockets:
            ps_srv = topo.socket_server[np.asarray(pl.ps_sockets, dtype=np.int64)]
            cores = cores + np.bincount(ps_srv, minlength=topo.n_servers) * prof.ps_cores
            mem = mem + np.bincount(ps_srv, minlength=topo.n_servers) * prof.ps_mem_gb
        return bool(np.all(cores <= self.cores_free + 1e-9) and np.all(mem <= self.mem_free + 1e-9))

    def forget(self) -> None:
        """Drop what is kept until the next commit (after changing the room directly)."""
        self._capacity.clear()
        self._free_gpus = None

    def worker_capacity(self, job: Job, reserve_ps: int = 0) -> np.ndarray:
        """Workers of ``job`` each server can still take (GPU slots, cores,
        memory), leaving room for ``reserve_ps`` PSs. Kept until the next
        commit (read-only: copy it to change it)."""
        key = (job.model, int(reserve_ps))
        cap = self._capacity.get(key)
        if cap is None:
            cap = self._capacity[key] = self._worker_capacity(job, reserve_ps)
            cap.flags.writeable = False
        return cap

    def _worker_capacity(self, job: Job, reserve_ps: int) -> np.ndarray:
        prof = self.profile(job)
        gpus = self.free_gpus_per_server()  # GPUs with a free slot per server, whatever the job
        cores = (self.cores_free - reserve_ps * prof.ps_cores) / max(prof.worker_cores, 1e-9)
        mem = (self.mem_free - reserve_ps * prof.ps_mem_gb) / max(prof.worker_mem_gb, 1e-9)
        return np.maximum(np.minimum(gpus, np.floor(np.minimum(cores, mem) + 1e-9)), 0).astype(np.int64)

    def free_gpus_per_server(self) -> np.ndarray:
        """GPUs with a free slot on each server, whatever the job (as floats), kept until the
        next commit (read-only)."""
        if self._free_gpus is None:
            topo = self.topo
            self._free_gpus = np.bincount(topo.gpu_server, weights=self.gpu_free > 0, minlength=topo.n_servers)
        return self._free_gpus

    def worker_total(self, job: Job) -> int:
        """Workers of ``job`` the whole cluster can still take (``worker_capacity``'s sum)."""
        return int(self.worker_capacity(job).sum())

    def fullest_fit(self, job: Job, n_workers: int, reserve_ps: int = 0) -> int:
        """The server that can take ``n_workers`` workers of ``job`` and has the
        least room for them (best fit), among those that can also leave room
        for ``reserve_ps`` PSs when any can; the lowest index among ties; -1
        when no single server can take them."""
        cap = self.worker_capacity(job)
        fit = np.flatnonzero(cap >= n_workers)
        if not fit.size:
            return -1
        if reserve_ps:
            better = fit[self.worker_capacity(job, reserve_ps=reserve_ps)[fit] >= n_workers]
            if better.size:
                fit = better
        return int(fit[np.argmin(cap[fit])])

    def ps_sockets_for(self, job: Job, n_ps: int, workers: object) -> tuple[int, ...] | None:
        """PS sockets: round-robin over the sockets of the workers' servers that
        have room, then over any socket with room (least-loaded server first).
        (``workers``: the workers' GPUs, an index array or a list.)"""
        if n_ps == 0:
            return ()
        topo, prof = self.topo, self.profile(job)
        wl = workers.tolist() if isinstance(workers, np.ndarray) else list(workers)  # type: ignore[attr-defined]
        # A job has a handful of workers: Python over them, and the room of their servers only.
        if self._lists is None:
            self._lists = (topo.gpu_socket.tolist(), topo.socket_server.tolist())
        gpu_socket, socket_server = self._lists
        per_sock: dict[int, int] = {}
        srv_w: dict[int, int] = {}
        for g in wl:
            s = gpu_socket[g]
            per_sock[s] = per_sock.get(s, 0) + 1
        for s, c in per_sock.items():
            v = socket_server[s]
            srv_w[v] = srv_w.get(v, 0) + c
        # Sockets of the workers first (in order of how many workers they host; ties: lowest first).
        pref = sorted(per_sock, key=lambda s: (-per_sock[s], s))
        wc, wm = prof.worker_cores, prof.worker_mem_gb
        cores_f, mem_f = self.cores_free, self.mem_free
        # room left per server once the workers are in (the same float operations as on the arrays)
        left = {v: [cores_f.item(v) - w * wc, mem_f.item(v) - w * wm] for v, w in srv_w.items()}
        need_c, need_m = prof.ps_cores - 1e-9, prof.ps_mem_gb - 1e-9
        out: list[int] = []

        def one_pass(sockets: list[int]) -> bool:
            """A PS on each socket of ``sockets`` with room, in turn, until all
            are placed; whether any was."""
            placed = False
            for s in sockets:
                srv = socket_server[s]
                r = left.get(srv)
                if r is None:
                    r = left[srv] = [cores_f.item(srv), mem_f.item(srv)]
                if r[0] >= need_c and r[1] >= need_m:
                    out.append(s)
                    r[0] -= prof.ps_cores
                    r[1] -= prof.ps_mem_gb
                    placed = True
                    if len(out) == n_ps:
                        break
            return placed

        # The first pass over the workers' sockets; the other sockets are ordered only when
        # it goes on past them (most PS jobs' PSs fit on their workers' sockets).
        placed = one_pass(pref)
        if len(out) < n_ps:
            w_srv = np.zeros(topo.n_servers)
            for v, w in srv_w.items():
                w_srv[v] = w
            cores = cores_f - w_srv * wc  # the room before this job's PSs, as the order reads it
            taken = set(pref)
            rest = [s for s in np.argsort(-cores[topo.socket_server], kind="stable").tolist() if s not in taken]
            placed = one_pass(rest) or placed
            order = pref + rest
            while placed and len(out) < n_ps:
                placed = one_pass(order)
        return tuple(out) if len(out) == n_ps else None
