"""Action masks: which GPUs and sockets can take a job's next task, and
which allocation candidates the heuristic placement can actually place.

A mask never allows an infeasible action: a worker needs a GPU with a free
slot (under ``max_tasks_per_gpu``) that holds no other worker of its job, and
its server's CPU cores and memory; a PS needs its socket's server's cores and
memory; an allocation candidate is allowed only when the placement policy
returns a placement for it that fits what is already decided at this
decision point (``Occupancy.fits``).
"""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ClusterView
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs.board import Board
from hrlsched.policies.placement.frame import IncrementalPlacement

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
        self.topo = board.topo

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

    def socket_mask(self) -> np.ndarray:
        p, t = self.prof, self.topo
        srv_ok = (self.cores_left >= p.ps_cores - EPS) & (self.mem_left >= p.ps_mem_gb - EPS)
        return srv_ok[t.socket_server]

    def place_worker(self, g: int) -> None:
        s = self.topo.gpu_server[g]
        self.gpus.append(int(g))
        self.gpu_left[g] -= 1
        self.cores_left[s] -= self.prof.worker_cores
        self.mem_left[s] -= self.prof.worker_mem_gb

    def place_ps(self, sock: int) -> None:
        s = self.topo.socket_server[sock]
        self.sockets.append(int(sock))
        self.cores_left[s] -= self.prof.ps_cores
        self.mem_left[s] -= self.prof.ps_mem_gb

    def placement(self) -> Placement:
        return Placement(tuple(self.gpus), tuple(self.sockets))


class HeuristicFeasibility:
    """Placements the heuristic placement policy gives for (job, workers, PSs)
    on the current board, cached until the board changes."""

    def __init__(self, policy: IncrementalPlacement) -> None:
        self.policy = policy
        self._cache: dict[tuple, Placement | int | None] = {}
        self._version = -1
        self._board: Board | None = None

    def _sync(self, board: Board) -> None:
        if board is not self._board or board.version != self._version:
            self._cache.clear()
            self._board, self._version = board, board.version

    def worker_room(self, board: Board, job: Job) -> int:
        """Most workers of ``job`` the board can still hold (GPUs with a free
        slot, per server bounded by its CPU cores and memory): a necessary
        condition of any placement, checked before asking the policy."""
        self._sync(board)
        key = ("room", job.model)
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = int(board.occ.worker_capacity(job).sum())
        return v  # type: ignore[return-value]

    def place(self, view: ClusterView, board: Board, job: Job, n_workers: int, n_ps: int) -> Placement | None:
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
                                   or not board.occ.fits(job, pl)):
                pl = None
        self._cache[key] = pl
        return pl
