"""Heuristic teachers for behaviour cloning: the action a heuristic would
take at an environment's current sub-step.

- Level 1 (allocation phase): the heuristic allocation policy (``optimus``
  by default) is run once per decision point on the view; the job being
  decided gets the candidate slot nearest to what the heuristic gave it
  (*keep* when that is its current allocation and placement, *wait* when it
  gave none). The menu has worker counts 1, 2, 4, ... so a heuristic's
  3 workers become 2 (the largest count not above it, else the smallest
  above); ``label_exact`` tells how often no rounding was needed.
- Level 2 (placement phase): the environment's heuristic placement
  (``pack`` by default) places the job's whole allocation on the board as it
  is; the label of each task is the next GPU (worker) or socket (PS) of that
  placement, or *defer* where the heuristic cannot place the job.
"""

from __future__ import annotations

import numpy as np

from hrlsched.contract import ARCHS, MODES
from hrlsched.core.placement import Placement
from hrlsched.envs.base import ALLOCATE, SchedulingEnv
from hrlsched.envs.candidates import KEEP, WAIT, nearest_slot
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.registry import ALLOCATIONS


class Teacher:
    """The action of ``allocation`` (by registry name) and of the env's own
    heuristic placement at the current state of ``env`` (an unwrapped
    ``SchedulingEnv``)."""

    def __init__(self, allocation: str = "optimus") -> None:
        if allocation not in ALLOCATIONS:
            raise ValueError(f"teacher: unknown allocation policy {allocation!r}; expected one of "
                             f"{sorted(ALLOCATIONS)}")
        self.name = allocation
        self._policy: AllocationPolicy | None = None
        self.labels = 0
        self.label_exact = 0

    def reset(self, env: SchedulingEnv) -> None:
        pol: AllocationPolicy = ALLOCATIONS[self.name].factory()  # type: ignore[assignment]
        pol.reset(env.topo, np.random.default_rng(0))
        self._policy = pol
        # The view and the partial placement a cache belongs to are held, not
        # their id(): a freed object's id is reused by the next one, and a
        # stale plan then labelled the next job's tasks (an IndexError, or
        # silently wrong labels).
        self._view: object | None = None
        self._allocs: dict[int, Allocation] = {}
        self._plan: tuple[object, Placement | None] | None = None

    def action(self, env: SchedulingEnv) -> int:
        if self._policy is None:
            raise RuntimeError("Teacher.action before Teacher.reset(env)")
        view = env._view
        assert view is not None
        if view is not self._view:  # a new decision point
            self._view = view
            dp = env.dp
            if env.hint_name == self.name:  # the env's hint is this heuristic: the same labels, computed once
                self._allocs = dp.hints
            else:
                self._allocs = self._policy.allocate(view)
            self._plan = None
        if env.phase == ALLOCATE:
            return self._allocate(env)
        return self._place(env)

    # ------------------------------------------------------------ level 1
    def _allocate(self, env: SchedulingEnv) -> int:
        view, k, t = env._view, env.k, env.table
        assert view is not None
        mask = env._mask[: t.size].astype(bool)
        job = view.jobs[k]
        al = self._allocs.get(job.job_id)
        self.labels += 1
        if al is None or al.workers < 1:
            self.label_exact += 1
            return WAIT
        arch = al.arch if al.arch is not None else job.arch
        mode = al.mode if al.mode is not None else job.mode
        ps = max(al.ps, 1) if arch == "ps" else 0
        pl = view.placements[k]
        keep = pl is not None and (arch, mode) == (job.arch, job.mode) and pl.n_workers == al.workers \
            and pl.n_ps == ps
        best = nearest_slot(t, mask, al.workers, ps, ARCHS.index(arch), MODES.index(mode), keep)
        if best == KEEP or (best > KEEP and t.workers[best] == al.workers and t.ps[best] == ps):
            self.label_exact += 1
        return best

    # ------------------------------------------------------------ level 2
    def _place(self, env: SchedulingEnv) -> int:
        part = env.part
        assert part is not None and env._view is not None
        if self._plan is None or self._plan[0] is not part:
            pl = env.feas.place(env._view, env.board, part.job, part.n_workers, part.n_ps)
            self._plan = (part, pl)
        pl = self._plan[1]
        mask = env._mask
        if pl is None:
            return env.defer_action if mask[env.defer_action] else int(np.flatnonzero(mask)[0])
        o = env.place_off
        if part.placing_worker:
            a = o + pl.gpus[len(part.gpus)]
        else:
            a = o + env.max_gpus + pl.ps_sockets[len(part.sockets)]
        if not mask[a]:  # the board moved under the plan: any valid target
            a = int(np.flatnonzero(mask)[0])
        return int(a)
