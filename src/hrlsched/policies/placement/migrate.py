"""``migrate``: ``pack``, then move each job whose workers span more servers
than they need onto fewer, where the room is there (migration for locality).

Gandiva (Xiao et al., OSDI'18) migrates jobs to improve their locality
as the cluster's occupancy changes; this is that rule
on top of ``pack``, without Gandiva's time-slicing or its packing by
profiled interference. Why: ``pack``, like every placement of
``IncrementalPlacement``, keeps a running job where it is while its
allocation does not change, so a job placed across servers while the
cluster was fragmented stays there when servers free up. On ``comm`` (10
Gbit/s NICs), seed 2003, the rules (``optimus-tuned``) left one resnet-50
at two workers on two servers: it finished after 25.8 h, 9.3 h with
migration (``docs/headroom.md``, "Migration").

The rule, after the placement of every job of the decision (in the
allocation's order): a job spanning more servers than the fewest that
could hold its workers (its worker count over the largest server's GPUs,
rounded up) is taken out and placed again by ``pack`` on what the other
jobs leave; the new placement is kept only where it spans fewer servers.
Moving a running job restarts it (the engine charges its checkpoint and
restore). Simplified: every such job is moved where it can be, without
weighing the restart against the job's remaining time, and only its own
span is looked at (not what the move does to its neighbours' links).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, ClusterView, Decision, effective_job
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.policies.base import Allocation
from hrlsched.policies.placement.occupancy import Occupancy
from hrlsched.policies.placement.pack import PackPlacement


def _spans(topo: Topology, placements: list[Placement]) -> np.ndarray:
    """Servers each placement spans (vectorised over all their GPUs)."""
    lens = np.fromiter((len(p.gpus) for p in placements), dtype=np.int64, count=len(placements))
    if not lens.sum():
        return np.zeros(len(placements), dtype=np.int64)
    g = np.fromiter((x for p in placements for x in p.gpus), dtype=np.int64, count=int(lens.sum()))
    owner = np.repeat(np.arange(len(placements)), lens)
    pairs = np.unique(owner * int(topo.n_servers) + topo.gpu_server[g])
    return np.bincount(pairs // int(topo.n_servers), minlength=len(placements))


def migrate_placements(view: ClusterView, placements: dict[int, Placement], jobs: dict[int, Job],
                       max_tasks_per_gpu: int = 1) -> dict[int, Placement]:
    """``placements`` (job id -> placement, in priority order) with the
    scattered jobs moved onto fewer servers where they fit; ``jobs``: each
    placed job as it runs (its chosen architecture and mode)."""
    if not placements:
        return placements
    topo = view.topology
    ids = list(placements)
    pls = [placements[j] for j in ids]
    spans = _spans(topo, pls)
    need = -(-np.fromiter((p.n_workers for p in pls), dtype=np.int64, count=len(pls)) // int(topo.server_gpus.max()))
    scattered = np.flatnonzero(spans > np.maximum(need, 1))
    if not scattered.size:
        return placements
    occ = Occupancy(view, max_tasks_per_gpu)
    occ.commit_many([jobs[j] for j in ids], pls)
    pack = PackPlacement()
    out = dict(placements)
    for i in scattered.tolist():
        jid, pl, job = ids[i], pls[i], jobs[ids[i]]
        occ.release(job, pl)
        new = pack.place_job(view, occ, job, pl.n_workers, pl.n_ps)
        if new is not None and occ.fits(job, new) and _spans(topo, [new])[0] < spans[i]:
            out[jid] = pl = new
        occ.commit(job, pl)
    return out


def migrate(view: ClusterView, decision: Decision, max_tasks_per_gpu: int = 1) -> Decision:
    """``decision`` with ``migrate_placements`` applied (the jobs with the
    architecture and mode it chooses for them)."""
    jobs: dict[int, Job] = {}
    for jid in decision.placements:
        j = view.jobs[view.index(jid)]
        a, m = decision.arch.get(jid, j.arch), decision.mode.get(jid, j.mode)
        jobs[jid] = effective_job(j, a, m) if (a, m) != (j.arch, j.mode) and a in ARCHS and m in MODES else j
    out = migrate_placements(view, decision.placements, jobs, max_tasks_per_gpu)
    return decision if out is decision.placements else dataclasses.replace(decision, placements=out)


class MigratePlacement(PackPlacement):
    """``pack``, then ``migrate_placements`` (see the module)."""

    name = "migrate"

    def finish(self, view: ClusterView, decision: Decision) -> Decision:
        return migrate(view, decision, self.max_tasks_per_gpu)

    def place(self, view: ClusterView, allocations: dict[int, Allocation]) -> dict[int, Placement]:
        out = super().place(view, allocations)
        return migrate_placements(view, out, {j: view.jobs[view.index(j)] for j in out}, self.max_tasks_per_gpu)
