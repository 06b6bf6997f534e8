"""``hrlsched/Flat-v0``: one level, the agent's, with no allocation choice:
a job's worker count is not chosen apart from its placement, it emerges
from it.

At each decision point the running jobs keep their placements (the flat
agent neither preempts nor resizes), and the waiting jobs (arrival order,
at most ``max_jobs``) are decided one by one. For the current job each
action either puts one more worker on a GPU or is *stop*: stop before any
worker means the job waits; after one or more it ends the workers (at the
menu's largest worker count, ``max(worker_options)``, they end by
themselves). Then, for a parameter-server job, one action per PS places it
on a socket, as many PSs as the menu's first PS rule gives for that worker
count (``ps_options[0]``, default *one*); *stop* there only at a dead end
(no socket can take the PS: the job waits). A job keeps its own
architecture and mode (the workload's default where it leaves them open).

The action layout is ``Placement-v0``'s: ``Discrete(max_gpus + max_sockets
+ 1)``, GPUs, then sockets, then *stop* (``defer_action``), so that the same
network family scores it (``agent.nets.HRLNet`` with its placement head:
the GPU pointer, the socket pointer and the defer score as *stop*). The
observation is ``Placement-v0``'s too; its ``context`` row counts the
workers left up to the cap. This is the flat agent of docs/hierarchy.md.

Masks, invalid actions, reward: see ``envs.base`` and docs/environments.md
(a forbidden action under ``invalid_action="fallback"`` makes the job wait).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs.base import SchedulingEnv
from hrlsched.envs.candidates import ps_count
from hrlsched.envs.decision import PLACE, DecisionPoint
from hrlsched.envs.pricing import bound


class FlatDecisionPoint(DecisionPoint):
    """A decision point of ``Flat-v0`` (see the module): the waiting jobs
    placed worker by worker until *stop*, then their PSs. Takes
    ``DecisionPoint``'s arguments with ``agent_allocates=False`` and
    ``agent_places=True``; ``allocation`` is not used."""

    heuristic_allocation = False

    def __init__(self, topology: Topology, *, ps_options: Sequence[str] = ("one", "half"), **kw: Any) -> None:
        if not ps_options:
            raise ValueError("ps_options: expected at least one PS rule (the first is the flat agent's)")
        self.ps_rule = str(ps_options[0])
        if kw.get("agent_allocates") or not kw.get("agent_places", True):
            raise ValueError("FlatDecisionPoint: expected agent_allocates=False and agent_places=True")
        super().__init__(topology, ps_options=ps_options, **kw)
        self.max_workers = int(self.table.workers.max())  # the menu's largest worker count
        self.flat_queue: list[int] = []

    def begin(self, view: ClusterView) -> bool:
        """Set up a point on ``view``: the running jobs keep their placements,
        the waiting ones queue; True if the agent has a choice."""
        self.pricing.begin(view)
        bound(self._caches)
        view = self.hint.order(view)  # (no hint: the view as it is)
        self.view = view
        self._board = None
        self._kept = None
        self.hint.allocate(view)
        n = self.n_dec = min(len(view.jobs), self.max_jobs)
        self.k = -1
        self.phase = PLACE
        self.part = None
        self.placements: dict[int, Placement] = {}
        self.arch: dict[int, str] = {}
        self.mode: dict[int, str] = {}
        self._running: list[int] = []
        self._reserved = np.zeros(n, dtype=bool)
        self.decided = np.zeros(self.max_jobs)
        self.chosen = np.zeros(self.max_jobs)
        self.obs.begin()
        self.queue = []
        vjobs, vpls = view.jobs, view.placements
        kept = [k for k in range(n) if vpls[k] is not None]
        kj: list[Job] = [vjobs[k] for k in kept]
        kp: list[Placement] = [vpls[k] for k in kept]  # type: ignore[misc]
        loads = (view.gpu_tasks, view.server_cores_used, view.server_mem_used) \
            if self.pricing.workload.whole and len(kp) == len(vpls) - vpls.count(None) else None
        waiting = [k for k in range(n) if vpls[k] is None]
        if self.board.commit_kept(kj, kp, loads):
            self._record_many(kj, kp)
        else:  # one after the other; a running job that no longer fits is the agent's to place anew
            for k, job, pl in zip(kept, kj, kp):
                if self.board.fits(job, pl):
                    self._commit(k, job, pl)
                else:
                    waiting.append(k)
            waiting.sort()
        for k in kept:
            self.chosen[k] = vpls[k].n_workers  # type: ignore[union-attr]
            self.decided[k] = 1.0
        self.flat_queue = waiting
        return self._next_choice()

    def skip(self) -> bool:
        """The current job waits (the fallback of a forbidden action)."""
        self._drop()
        return self._next_choice()

    def why_invalid(self, a: int) -> str:
        """Why action ``a`` is not allowed now (the message of ``InvalidActionError``)."""
        if not 0 <= a < self.n_actions:
            return f"out of range 0..{self.n_actions - 1}"
        part = self.part
        worker = part is not None and part.placing_worker
        if a == self.defer_action:
            return "stop is only valid while the job's workers are being placed, or when no socket can take its PS"
        if a - self.place_off < self.max_gpus:
            if not worker:
                return f"GPU {a - self.place_off}: expected a socket for the job's PS (its workers are placed)"
            return f"GPU {a - self.place_off} cannot take a worker of this job (no free slot, already holds one " \
                   "of its workers, or its server lacks CPU cores or memory); expected a valid GPU or stop"
        s = a - self.place_off - self.max_gpus
        if worker:
            return f"socket index {s}: expected a GPU for the job's next worker, or stop"
        return f"socket index {s} cannot take a PS (its server lacks CPU cores or memory, or a GPU given for a PS)"

    # ------------------------------------------------------------ internals
    def _next_choice(self) -> bool:
        """The next waiting job that can take a worker; False when the point is done."""
        view = self.view
        assert view is not None
        while self.flat_queue:
            k = self.k = self.flat_queue.pop(0)
            job = view.jobs[k]
            if self.feas.worker_room(self.board, job) < 1:  # no room for one worker: it waits, unasked
                self.decided[k] = 1.0
                continue
            self._begin_place(job, self.max_workers, self._ps(job, 1))
            self._mask[self.defer_action] = 1  # stop (here: wait)
            return True
        return False

    def _ps(self, job: Job, workers: int) -> int:
        return ps_count(self.ps_rule, workers) if job.arch == "ps" else 0

    def _drop(self) -> None:
        """The current job waits (what it placed is dropped: its room was a copy)."""
        self.part = None
        self.decided[self.k] = 1.0
        self.chosen[self.k] = 0.0
        self.obs.rows_dirty = True

    def _place_task(self, a: int) -> None:
        part = self.part
        assert part is not None
        if not part.placing_worker:  # a PS (or stop at its dead end): as Placement-v0's
            super()._place_task(a)
            return
        o = self.place_off
        if a != self.defer_action:
            part.place_worker(a - o)
            self.obs.worker_placed(part, a - o)
            if part.placing_worker:  # room for more: the last mask narrowed where this one went, and stop
                self._mask = self.place_masks.after_worker(self._mask, part, a - o)
                self._mask[self.defer_action] = 1
                return
        w = len(part.gpus)  # stop, or the cap reached
        if w == 0:
            self._drop()
            return
        part.n_workers, part.n_ps = w, self._ps(part.job, w)
        if part.complete:
            self.part = None
            self._commit(self.k, part.job, part.placement())
            self.decided[self.k] = 1.0
            self.chosen[self.k] = w
            return
        self._mask = self.place_masks.first(part)  # its PSs' sockets (stop alone at a dead end)


class FlatEnv(SchedulingEnv):
    """``hrlsched/Flat-v0`` (see the module)."""

    agent_allocates = False
    agent_places = True
    point_class = FlatDecisionPoint
