"""The hint of a decision point: an allocation heuristic run at each point,
whose choices the level-1 observation shows (``hint_workers`` per job, the
nearest menu slot as ``is_hint``), so that a network can learn where to
depart from it; which jobs a point decides and in which order
(``window``); which running jobs hold their room until their turn
(``reserve_running``).
"""

from __future__ import annotations

import copy

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs.candidates import WAIT, CandidateTable, nearest_slot
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.hint import HintConfig


class Hint:
    """The hint of a decision point that decides ``max_jobs`` jobs at most.

    - ``policy``: the allocation heuristic (as constructed, with its
      options), or None: no hint (its features are zero). Each episode runs
      on a fresh copy of it (``reset``), as made, so that no episode sees
      what another left in it.
    - ``config``: the hint's settings (``HintConfig``: ``window``,
      ``reserve_running``; validated there).
    """

    def __init__(self, policy: AllocationPolicy | None, config: HintConfig, max_jobs: int) -> None:
        if config.window != "arrival" and policy is None:
            raise ValueError(f"hint.window: {config.window!r} orders jobs by the hint, but there is no hint here "
                             "(a hint runs where the agent allocates)")
        self.template = policy
        self.window = config.window
        self.reserve_running = config.reserve_running
        self.max_jobs = max_jobs
        self.policy: AllocationPolicy | None = None  # this episode's
        self.allocs: dict[int, Allocation] = {}  # the hint's allocations at this point, by job id
        self._nearest: dict[tuple, int] = {}  # the hint's slot, per (valid slots, hint)

    def caches(self) -> tuple[dict, ...]:
        return (self._nearest,)

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        """A new episode: a fresh copy of the heuristic, reset (seeded from ``rng``)."""
        self.policy = None
        if self.template is not None:
            self.policy = copy.deepcopy(self.template)
            self.policy.reset(topology, np.random.default_rng(rng.integers(2**63)))
        self.allocs = {}

    def order(self, view: ClusterView) -> ClusterView:
        """``window="hint"``/``"hint-order"``: the hint allocates first, and the
        point works on ``view`` with its jobs so ordered (``ClusterView.permuted``):
        the jobs the hint runs in its priority order, then the others in
        arrival order, the first ``max_jobs`` of them in arrival order for
        ``"hint"``. Else ``view`` as it is (the hint allocates in ``allocate``)."""
        if self.window == "arrival" or self.policy is None:
            return view
        self.allocs = hints = self.policy.allocate(view)
        first = [view.index(j) for j in self.policy.priority(hints) if hints[j].workers > 0]
        taken = set(first)
        order = first + [k for k in range(len(view.jobs)) if k not in taken]
        if self.window == "hint":
            order[: self.max_jobs] = sorted(order[: self.max_jobs])
        return view.permuted(order)

    def allocate(self, view: ClusterView) -> None:
        """The hint's allocations at this point (``order``'s where it made them).
        Called at every point: the heuristic keeps its own state."""
        if self.policy is not None and self.window == "arrival":
            self.allocs = self.policy.allocate(view)

    def held(self, view: ClusterView, running: list[int]) -> list[int]:
        """Which of the ``running`` jobs (indices into ``view.jobs``) hold their
        room until their turn: all (``reserve_running=True``), none, or with
        ``"hint"`` those the hint keeps as they run."""
        if not self.reserve_running or not running:
            return []
        if self.reserve_running == "hint" and self.policy is not None:
            return [k for k in running if self.keeps(view.jobs[k], view.placements[k])]
        return running

    def keeps(self, job: Job, pl: Placement | None) -> bool:
        """The hint keeps running ``job`` as it runs (same workers, PSs,
        architecture and mode): only then is its room worth holding, since any
        other choice restarts it wherever it goes."""
        al = self.allocs.get(job.job_id)
        if al is None or pl is None or al.workers != len(pl.gpus) or al.arch not in (None, job.arch) \
                or al.mode not in (None, job.mode):
            return False
        return (max(al.ps, 1) if job.arch == "ps" else 0) == len(pl.ps_sockets)

    def workers(self, jobs: list[Job]) -> list[int]:
        """The hint's workers of each of ``jobs`` (0 where it gives none)."""
        hw = self.allocs
        return [hw[j.job_id].workers if j.job_id in hw else 0 for j in jobs]

    def slot(self, t: CandidateTable, valid: np.ndarray, vk: bytes, cur: Job, cur_pl: Placement | None,
             bases: dict[int, Job]) -> int:
        """With a hint, the menu slot nearest to its allocation of ``cur`` among
        the ``valid`` slots (their bytes ``vk``; ``bases``: the jobs as first
        seen, whose open choices the hint may change); *wait* where the hint
        gives it nothing."""
        al = self.allocs.get(cur.job_id)
        if al is None:
            return WAIT
        base = bases[cur.job_id]
        arch = al.arch if al.arch is not None and base.arch_open else cur.arch
        mode = al.mode if al.mode is not None and base.mode_open else cur.mode
        ps = max(al.ps, 1) if arch == "ps" else 0
        keep = cur_pl is not None and (arch, mode) == (cur.arch, cur.mode) and cur_pl.n_workers == al.workers \
            and cur_pl.n_ps == ps
        nkey = (vk, al.workers, ps, arch, mode, keep)
        hint = self._nearest.get(nkey, -1)
        if hint < 0:
            hint = self._nearest[nkey] = nearest_slot(t, valid, al.workers, ps, ARCHS.index(arch),
                                                      MODES.index(mode), keep)
        return hint
