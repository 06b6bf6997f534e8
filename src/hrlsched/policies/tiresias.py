"""Tiresias (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed
Deep Learning", NSDI'19).

Rules followed:
- Two-dimensional attained service: a job's service is GPUs x time it has
  held them (``view.attained_gpu_s``); no knowledge of job durations.
- Discretised 2D-LAS: K priority queues split by service thresholds
  (``thresholds``, GPU-seconds); a job starts in the highest queue and is
  demoted when its service passes the queue's threshold. Queues are served
  in priority order, jobs within a queue in arrival order (FIFO), or, with
  ``gittins=True`` (2D-Gittins), by the Gittins index of their service
  computed from the distribution of the service of the jobs completed so
  far (Sec. 3.2; LAS order until ``min_history`` jobs have completed).
- Preemption: every round the priority order is re-evaluated; a running job
  that no longer fits in front of higher-priority jobs is preempted.
  Jobs that do not fit are skipped and later ones may start (no blocking).
- Starvation guard (PromoteKnob): a job that has waited at least
  ``starve_knob`` x the service time it ran since its last promotion is
  promoted back to the highest queue and its count restarts (0: off).
- Placement (its own, ``tiresias`` placement): profile-based consolidation:
  models whose tensors are large and skewed must be consolidated on the
  fewest servers; the others may be spread (least-loaded servers).

Departures from the paper: the skew profile is approximated by model size
(>= ``skew_mb`` MB consolidates); each job gets the GPUs it requested and one
PS (PS jobs); the defaults follow the Pollux authors' re-implementation
(one threshold at 16 GPU-hours, starvation guard off), which is the setting
of the published comparison we reproduce (hrlsched reproduce pollux-sim).
"""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.placement.balance import BalancePlacement
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.placement.occupancy import Occupancy
from hrlsched.policies.placement.pack import PackPlacement


def gittins_index(samples: np.ndarray, attained: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    """Gittins index G(a, D) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a]
    of jobs with attained service ``a`` and service quantum ``D``, from
    service samples S (vectorised over jobs)."""
    s = np.sort(np.asarray(samples, dtype=float))
    a = np.asarray(attained, dtype=float)[:, None]
    d = np.asarray(quantum, dtype=float)[:, None]
    alive = s[None, :] > a
    n_alive = alive.sum(axis=1)
    done = (alive & (s[None, :] <= a + d)).sum(axis=1)
    spent = np.where(alive, np.minimum(s[None, :] - a, d), 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where((n_alive > 0) & (spent > 0), done / np.maximum(spent, 1e-12), 0.0)
    return g


class Tiresias(AllocationPolicy):
    name = "tiresias"
    event_driven = False
    default_placement = "tiresias"

    def __init__(self, thresholds: tuple[float, ...] = (16 * 3600.0,), starve_knob: float = 0.0,
                 gittins: bool = False, min_history: int = 10) -> None:
        if any(b <= a for a, b in zip(thresholds, thresholds[1:])) or any(t <= 0 for t in thresholds):
            raise ValueError(f"tiresias thresholds: expected increasing positive GPU-seconds, got {thresholds}")
        self.thresholds = np.asarray(thresholds, dtype=float)
        self.starve_knob = float(starve_knob)
        self.gittins = gittins
        self.min_history = min_history
        if gittins:
            self.name = "tiresias-gittins"
        # LAS queues in arrival order move only at arrivals, completions and demotions (recheck_s);
        # Gittins' order and the starvation guard move with time and the history: asked every round.
        self.recheck_driven = not gittins and self.starve_knob == 0

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.base: dict[int, float] = {}  # attained service at the last promotion
        self.last_attained: dict[int, float] = {}
        self.waiting_since: dict[int, float] = {}
        self.history: list[float] = []  # total service of completed jobs

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        ids = view.job_ids
        live = set(ids.tolist())
        for jid in [j for j in self.last_attained if j not in live]:  # finished since last round
            self.history.append(self.last_attained.pop(jid))
            self.base.pop(jid, None)
            self.waiting_since.pop(jid, None)
        att = view.attained_gpu_s
        base = np.array([self.base.get(int(j), 0.0) for j in ids])
        running = view.running
        if self.starve_knob > 0:
            for k, jid in enumerate(ids.tolist()):
                if running[k]:
                    self.waiting_since.pop(jid, None)
                elif att[k] > 0:
                    since = self.waiting_since.setdefault(jid, view.time_s)
                    ran = (att[k] - base[k]) / max(view.jobs[k].requested_gpus, 1)
                    if ran > 0 and view.time_s - since >= self.starve_knob * ran:
                        self.base[jid] = base[k] = att[k]  # promote to the highest queue
                        self.waiting_since[jid] = view.time_s
        for jid, a in zip(ids.tolist(), att):
            self.last_attained[jid] = float(a)
        service = att - base
        queue = np.searchsorted(self.thresholds, service, side="right")
        arrival = np.array([j.arrival_s for j in view.jobs])
        if self.gittins and len(self.history) >= self.min_history:
            edges = np.append(self.thresholds, np.inf)
            quantum = np.where(np.isfinite(edges[queue]), edges[queue] - service, np.max(self.history))
            prio = -gittins_index(np.asarray(self.history), service, quantum)
            order = np.lexsort((ids, arrival, prio, queue))
        else:
            order = np.lexsort((ids, arrival, queue))
        free = view.topology.n_gpus
        out: dict[int, Allocation] = {}
        for k in order:
            job = view.jobs[k]
            if job.requested_gpus <= free:
                out[job.job_id] = Allocation(job.requested_gpus, 1 if job.arch == "ps" else 0)
                free -= job.requested_gpus
        return out

    def recheck_s(self, view: ClusterView, placements: dict[int, Placement]) -> float | None:
        """The first round boundary at which a running job's service may pass
        its queue's threshold (a demotion); the engine adds held seconds x
        workers to the attained service of each running job every round."""
        if not placements or not self.recheck_driven:
            return None
        T = view.round_s
        n = len(placements)
        idx = np.fromiter((view.index(j) for j in placements), dtype=np.int64, count=n)
        workers = np.fromiter((pl.n_workers for pl in placements.values()), dtype=float, count=n)
        base = np.fromiter((self.base.get(j, 0.0) for j in placements), dtype=float, count=n)
        service = view.attained_gpu_s[idx] - base
        q = np.searchsorted(self.thresholds, service, side="right")
        below = q < self.thresholds.size
        if not below.any():
            return None
        # Rounded down by a hair: a round early only asks again; a round late would be wrong.
        m = np.ceil((self.thresholds[q[below]] - service[below]) / (workers[below] * T) - 1e-6)
        return view.time_s + max(1.0, float(m.min())) * T


class TiresiasPlacement(IncrementalPlacement):
    """Tiresias' profile-based placement: consolidate skewed (large) models,
    spread the others over the least-loaded servers."""

    name = "tiresias"
    memoryless = True

    def __init__(self, skew_mb: float = 100.0) -> None:
        self.skew_mb = skew_mb
        self._pack = PackPlacement()
        self._spread = BalancePlacement()

    def place_job(self, view: ClusterView, occ: Occupancy, job: Job, n_workers: int, n_ps: int) -> Placement | None:
        if view.perf.profile(job).params_mb >= self.skew_mb:
            return self._pack.place_job(view, occ, job, n_workers, n_ps)
        return self._spread.place_job(view, occ, job, n_workers, n_ps)
