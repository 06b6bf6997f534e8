"""Checking a scheduler's decision against the cluster before it is applied.

A decision names only active jobs; each placement has at least one worker,
distinct GPUs within a job, GPU and socket indices in range, at least one PS
for a parameter-server job and none for an all-reduce one (under the job's
architecture after the decision); no GPU holds more workers than the
scheduler may time-share; no server's CPU cores or memory are exceeded;
architecture and mode are set only where the job leaves them open. Anything
else raises ``InvalidDecisionError`` naming the job(s) and the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, Decision, InvalidDecisionError
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.sim.state import SimState


@dataclass(frozen=True, eq=False)
class Resources:
    """Per-job CPU cores and memory of a worker and of a PS (engine job order)."""

    w_cores: np.ndarray
    w_mem: np.ndarray
    p_cores: np.ndarray
    p_mem: np.ndarray


def loads(
    topo: Topology, pls: Sequence[Placement], idx: np.ndarray | Sequence[int], res: Resources
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Workers per GPU, and CPU cores and memory used per server, by ``pls``
    (the placements of jobs ``idx``)."""
    m = len(pls)
    wl = np.fromiter((len(p.gpus) for p in pls), dtype=np.int64, count=m)
    pl_ = np.fromiter((len(p.ps_sockets) for p in pls), dtype=np.int64, count=m)
    gflat = np.fromiter((g for p in pls for g in p.gpus), dtype=np.int64, count=int(wl.sum()))
    sflat = np.fromiter((s for p in pls for s in p.ps_sockets), dtype=np.int64, count=int(pl_.sum()))
    idx = np.asarray(idx, dtype=np.int64)
    wo, po = np.repeat(idx, wl), np.repeat(idx, pl_)
    gs, ss = topo.gpu_server[gflat], topo.socket_server[sflat]
    ns = topo.n_servers
    tasks = np.bincount(gflat, minlength=topo.n_gpus)
    cores = np.bincount(gs, weights=res.w_cores[wo], minlength=ns) + np.bincount(ss, weights=res.p_cores[po], minlength=ns)
    mem = np.bincount(gs, weights=res.w_mem[wo], minlength=ns) + np.bincount(ss, weights=res.p_mem[po], minlength=ns)
    return tasks, cores, mem


def check_placement(topo: Topology, jid: int, arch: str, pl: object) -> None:
    if not isinstance(pl, Placement):
        raise InvalidDecisionError(f"job {jid}: placement must be a Placement, got {type(pl).__name__}")
    if pl.n_workers < 1:
        raise InvalidDecisionError(f"job {jid}: a running job needs at least one worker")
    if len(set(pl.gpus)) != pl.n_workers:
        raise InvalidDecisionError(f"job {jid}: two workers of one job on the same GPU {pl.gpus}")
    if min(pl.gpus) < 0 or max(pl.gpus) >= topo.n_gpus:
        raise InvalidDecisionError(f"job {jid}: GPU index out of range 0..{topo.n_gpus - 1}: {pl.gpus}")
    if arch == "ps":
        if pl.n_ps < 1:
            raise InvalidDecisionError(f"job {jid}: a parameter-server job needs at least one PS")
        if min(pl.ps_sockets) < 0 or max(pl.ps_sockets) >= topo.n_sockets:
            raise InvalidDecisionError(
                f"job {jid}: PS socket index out of range 0..{topo.n_sockets - 1}: {pl.ps_sockets}"
            )
    elif pl.n_ps:
        raise InvalidDecisionError(f"job {jid}: an all-reduce job has no parameter servers, got {pl.n_ps}")


def check_choices(
    decision: Decision, st: SimState, index: dict[int, int], base: Sequence[Job],
    allowed_seen: set[tuple[str, int, object]] | None = None,
) -> dict[int, tuple[str, str]]:
    """Validated architecture/mode choices: {job index: (arch, mode)} for the
    jobs whose effective architecture or mode changes. ``allowed_seen``: a
    set the caller keeps over calls with the same ``base`` jobs, of
    (what, job id, value) already found allowed for the job (the check does
    not depend on the state; most decisions repeat every job's choice)."""
    last = st.last_choices
    if last is not None and last[2] == st.n_finished and decision.arch == last[0] and decision.mode == last[1]:
        # The choices of the last applied decision: still all active (none finished), still
        # allowed, and already the jobs' effective ones: no change.
        return {}
    is_active = st.is_active
    if last is not None and decision.arch.items() <= last[0].items() and decision.mode.items() <= last[1].items():
        # Some of them (jobs finished since): allowed, and the jobs' effective ones (a job not
        # named keeps its own, which the last decision set); only whether each job is active is left,
        # and only a job finished since may not be (else the loop below names it).
        if not any(base[i].job_id in decision.arch or base[i].job_id in decision.mode
                   for i in st.finished[last[2]:]):
            return {}
        for what, table in (("arch", decision.arch), ("mode", decision.mode)):
            for jid in table:
                i = index.get(jid)
                if i is None or not is_active[i]:
                    raise InvalidDecisionError(f"job {jid}: {what} given for a job that is not active")
        return {}
    out: dict[int, tuple[str, str]] = {}
    seen = allowed_seen if allowed_seen is not None else set()
    for what, table, allowed in (("arch", decision.arch, ARCHS), ("mode", decision.mode, MODES)):
        for jid, v in table.items():
            i = index.get(jid)
            if i is None or not is_active[i]:
                raise InvalidDecisionError(f"job {jid}: {what} given for a job that is not active")
            if (what, jid, v) in seen:
                continue
            if v not in allowed:
                raise InvalidDecisionError(f"job {jid}: {what} must be one of {list(allowed)}, got {v!r}")
            job = base[i]
            is_open = job.arch_open if what == "arch" else job.mode_open
            own = job.arch if what == "arch" else job.mode
            if not is_open and v != own:
                raise InvalidDecisionError(
                    f"job {jid}: {what} is fixed to {own!r} by the job ({what}_open is false), got {v!r}"
                )
            if type(v) is str:  # hashable, and the same value next time
                seen.add((what, jid, v))
    for jid in decision.arch.keys() | decision.mode.keys():
        i = index[jid]
        cur = st.jobs[i]
        a, m = decision.arch.get(jid, cur.arch), decision.mode.get(jid, cur.mode)
        if a == "allreduce" and m == "async":
            raise InvalidDecisionError(
                f"job {jid}: mode 'async' with arch 'allreduce' is not a thing: a ring all-reduce is a collective "
                "(every worker waits for the others); asynchronous training needs arch 'ps'"
            )
        if (a, m) != (cur.arch, cur.mode):
            out[i] = (a, m)
    return out


# Most jobs a decision may move for ``loads_after`` (beyond, ``decision_loads``' one vectorised pass
# is faster: about 40 us for 15 running jobs, against 20-30 us for one to three moved jobs).
LOADS_AFTER_MAX = 3


def check_decision(
    decision: object,
    st: SimState,
    topo: Topology,
    index: dict[int, int],
    base: Sequence[Job],
    res: Resources,
    max_share: int,
    allowed_seen: set[tuple[str, int, object]] | None = None,
    whole_loads: bool = False,
) -> tuple[dict[int, Placement], tuple[np.ndarray, np.ndarray, np.ndarray] | None, dict[int, tuple[str, str]]]:
    """Check a decision against the cluster. Returns {job index: canonical
    placement}, the loads it puts on GPUs and servers (None when every
    placement is a running job's, unchanged: then it needs no load check, and
    ``decision_loads`` gives the loads if the caller needs them), and the
    architecture / mode changes {job index: (arch, mode)}. ``allowed_seen``:
    see ``check_choices``. ``whole_loads``: every CPU and memory figure of
    ``res`` is a whole number (far from 2**53) and ``st``'s loads are its
    running jobs': the loads are then those of ``st`` with the jobs that move
    taken off and put back (``loads_after``), the same numbers as summed
    anew."""
    if not isinstance(decision, Decision):
        raise InvalidDecisionError(f"scheduler returned {type(decision).__name__}, expected a Decision")
    jobs = st.jobs
    choices = check_choices(decision, st, index, base, allowed_seen) if decision.arch or decision.mode else {}
    out: dict[int, Placement] = {}
    running, is_active = st.running, st.is_active
    all_kept = True
    kept = 0
    for jid, pl in decision.placements.items():
        i = index.get(jid)
        old = running.get(i)
        if old is not None and pl is old and i not in choices:  # a running job (so active), unchanged: checked when made
            out[i] = pl
            kept += 1
            continue
        if i is None or not is_active[i]:
            raise InvalidDecisionError(f"job {jid}: not active (unknown, not yet arrived, or finished)")
        all_kept = False
        check_placement(topo, jid, choices[i][0] if i in choices else jobs[i].arch, pl)
        out[i] = pl.canonical()
    for jid, bs in decision.batch_sizes.items():
        if jid not in decision.placements:
            raise InvalidDecisionError(f"job {jid}: batch size given for a job that does not run")
        if not isinstance(bs, (int, np.integer)) or isinstance(bs, bool) or bs < 1:
            raise InvalidDecisionError(f"job {jid}: batch size must be a positive integer, got {bs!r}")
    if all_kept:
        # Every placement is a running one, unchanged: a subset of the running set, which is a
        # subset of the last decision's, checked as a whole (loads only grow with more tasks).
        return out, None, choices
    # Jobs that move, start or stop: a few (a placement phase's) are taken off and put back one
    # by one; more (an allocation's restarts) are summed anew in one vectorised pass.
    if whole_loads and (len(out) - kept) + (len(running) - kept) <= LOADS_AFTER_MAX:
        new_loads = loads_after(out, st, topo, res, max_share)
        if new_loads is not None:
            return out, new_loads, choices
    return out, decision_loads(out, topo, res, max_share, jobs), choices


def loads_after(
    out: dict[int, Placement], st: SimState, topo: Topology, res: Resources, max_share: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``decision_loads``'s loads of ``out`` from ``st``'s (its running
    jobs'): the running jobs whose placement goes or changes taken off, the
    new placements put on, task by task in Python (a decision moves a job or
    two). The same numbers only where every CPU and memory figure is a whole
    number (sums exact in any order). None where a limit is exceeded:
    ``decision_loads`` then says which jobs."""
    tasks, cores, mem = st.gpu_tasks.copy(), st.cores_used.copy(), st.mem_used.copy()
    for i, pl in st.running.items():
        if out.get(i) is not pl:
            add_tasks(tasks, cores, mem, topo, res, i, pl, -1)
    for i, pl in out.items():
        if st.running.get(i) is not pl:
            add_tasks(tasks, cores, mem, topo, res, i, pl, 1)
    if tasks.max() > max_share or (cores > topo.server_cores + 1e-9).any() or (mem > topo.server_mem_gb + 1e-9).any():
        return None
    return tasks, cores, mem


def add_tasks(tasks: np.ndarray, cores: np.ndarray, mem: np.ndarray, topo: Topology, res: Resources, i: int,
              pl: Placement, sign: int) -> None:
    """Put job ``i``'s tasks at ``pl`` on the loads (``sign`` 1) or take them
    off (-1), in place, task by task (a job's few tasks: numpy calls on them
    cost more). The loads are those of summing them anew only where every CPU
    and memory figure is a whole number (``Simulation._whole_loads``)."""
    gsrv, ssrv = topo.gpu_server, topo.socket_server
    wc, wm = sign * res.w_cores[i], sign * res.w_mem[i]
    for g in pl.gpus:
        tasks[g] += sign
        v = gsrv[g]
        cores[v] += wc
        mem[v] += wm
    if pl.ps_sockets:
        pc, pm = sign * res.p_cores[i], sign * res.p_mem[i]
        for x in pl.ps_sockets:
            v = ssrv[x]
            cores[v] += pc
            mem[v] += pm


def decision_loads(
    out: dict[int, Placement], topo: Topology, res: Resources, max_share: int, jobs: Sequence[Job]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The loads of the placements ``out`` ({job index: placement}) on GPUs and
    servers, checked against the time-sharing limit and the servers' capacity."""
    idx = np.fromiter(out.keys(), dtype=np.int64, count=len(out))
    pls = list(out.values())
    tasks, cores, mem = loads(topo, pls, idx, res)
    if tasks.size and tasks.max() > max_share:
        g = int(np.argmax(tasks))
        who = sorted(jobs[i].job_id for i, p in zip(idx.tolist(), pls) if g in p.gpus)
        raise InvalidDecisionError(
            f"jobs {who}: {int(tasks[g])} workers on GPU {g}, at most {max_share} allowed by this scheduler"
        )
    for what, used, cap in (("CPU cores", cores, topo.server_cores), ("memory (GiB)", mem, topo.server_mem_gb)):
        over = np.flatnonzero(used > cap + 1e-9)
        if over.size:
            s = int(over[0])
            who = sorted(
                jobs[i].job_id
                for i, p in zip(idx.tolist(), pls)
                if any(topo.gpu_server[g] == s for g in p.gpus)
                or any(topo.socket_server[x] == s for x in p.ps_sockets)
            )
            raise InvalidDecisionError(f"jobs {who}: need {used[s]:g} {what} on server {s}, which has {cap[s]:g}")
    return tasks, cores, mem
