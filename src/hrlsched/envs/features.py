"""Observation builders: padded per-job, per-GPU, per-link and
per-candidate feature matrices (float32) with validity masks, and the
``gymnasium`` Dict space that holds them.

Rows are padded to the environment's ``max_jobs``/``max_gpus``/``max_links``
(from the scenario, or constructor arguments), so one network reads any
cluster: it applies a shared encoder to each row and masks the padding.
Counts are divided by documented scales (``JOB_SCALE`` etc.) so that
features stay of order one; nothing is clipped except at +/-1e6.

Per decision point the job and link matrices are built once; per sub-step
only the columns that a commitment changes are rewritten (the job being
decided, what it chose; the GPU matrix, which follows the board).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.envs.board import LINK_KINDS, Board
from hrlsched.envs.masks import PartialPlacement

WORKER_SCALE = 8.0  # workers and PSs are divided by this
HOUR = 3600.0
BIG = 1e6

JOB_FEATURES = (
    "valid", "is_current", "decided", "chosen_workers", "running", "workers", "ps",
    "log_age_h", "progress_frac", "log_remaining_h", "speed_vs_requested", "gain_one_more_worker",
    "params_gb", "sample_ms", "requested_gpus", "arch_ps", "mode_async", "arch_open", "mode_open",
    "log_restarts", "log_attained_gpu_h",
)
GPU_FEATURES = (
    "valid", "speed", "tasks_decided", "tasks_before", "others_on_switch", "others_on_socket",
    "others_on_server", "ps_on_socket", "ps_on_server", "server_cores_free", "server_mem_free",
    "own_on_gpu", "own_on_server", "own_on_switch",
)
SOCKET_FEATURES = (
    "valid", "ps_decided", "ps_on_server", "workers_on_socket", "server_cores_free", "server_mem_free",
    "own_workers_on_socket", "own_on_server", "own_ps_on_socket",
)
GROUP_COLUMNS = ("switch", "socket", "server")  # ``gpu_groups``: each GPU's switch, socket, server index
LINK_FEATURES = ("valid", *(f"kind_{k}" for k in LINK_KINDS), "capacity_100gbps", "utilisation", "jobs_crossing")
CANDIDATE_FEATURES = (
    "valid", "is_wait", "is_keep", "workers", "ps", "arch_ps", "mode_async", "speed_vs_requested",
    "log_hours_to_finish", "restarts_job", "servers_spanned", "share_of_free_gpus",
)
CLUSTER_FEATURES = (
    "log_time_h", "active_jobs", "queued_jobs", "free_gpus_decided", "free_gpus_before", "free_cores",
    "free_mem", "jobs_left_to_decide", "log_decision_points",
)
PHASES = ("allocate", "place_worker", "place_ps")
CONTEXT_FEATURES = (*(f"phase_{p}" for p in PHASES), "workers_left", "ps_left", "tasks_done")


def observation_space(max_jobs: int, max_gpus: int, max_links: int, n_actions: int,
                      n_candidates: int | None, max_sockets: int) -> spaces.Dict:
    def box(*shape: int) -> spaces.Box:
        return spaces.Box(-BIG, BIG, shape=shape, dtype=np.float32)

    d: dict[str, spaces.Space] = {
        "jobs": box(max_jobs, len(JOB_FEATURES)),
        "job_mask": spaces.MultiBinary(max_jobs),
        "gpus": box(max_gpus, len(GPU_FEATURES)),
        "gpu_mask": spaces.MultiBinary(max_gpus),
        # -1 on padded rows; lets a network pool GPUs by switch, socket and server
        "gpu_groups": spaces.Box(-1, max_gpus, shape=(max_gpus, len(GROUP_COLUMNS)), dtype=np.int64),
        "sockets": box(max_sockets, len(SOCKET_FEATURES)),
        "socket_mask": spaces.MultiBinary(max_sockets),
        "links": box(max_links, len(LINK_FEATURES)),
        "link_mask": spaces.MultiBinary(max_links),
        "cluster": box(len(CLUSTER_FEATURES)),
        "context": box(len(CONTEXT_FEATURES)),
        "current_job": spaces.MultiBinary(max_jobs),
        "action_mask": spaces.MultiBinary(n_actions),
    }
    if n_candidates is not None:
        d["candidates"] = box(n_candidates, len(CANDIDATE_FEATURES))
    return spaces.Dict(d)


def static_links(kind: np.ndarray, cap: np.ndarray, max_links: int) -> np.ndarray:
    """The link rows that do not move: validity, kind one-hot, capacity."""
    n = kind.size
    out = np.zeros((max_links, len(LINK_FEATURES)), dtype=np.float32)
    out[:n, 0] = 1.0
    out[np.arange(n), 1 + kind] = 1.0
    out[:n, 1 + len(LINK_KINDS)] = cap / 100.0
    return out


def link_utilisation(perf: object, view: ClusterView, n_links: int) -> np.ndarray | None:
    """Each physical link's load over its capacity (the busier direction),
    from the analytic model's traffic of the running jobs at their measured
    speeds; None when the model exposes no traffic."""
    traffic = getattr(perf, "traffic", None)
    capacity = getattr(perf, "capacity", None)
    if traffic is None or capacity is None or getattr(perf, "n_links", -1) != n_links:
        return None
    load = np.zeros(2 * n_links)
    for job, pl, sp, bs in zip(view.jobs, view.placements, view.speed, view.batch_sizes):
        if pl is None or sp <= 0:
            continue
        links, nbytes = traffic(job, pl, int(bs))
        load += np.bincount(links, weights=nbytes * (sp / bs), minlength=2 * n_links)
    u = load / capacity
    return np.maximum(u[:n_links], u[n_links:])


def gpu_groups(topo: Topology, max_gpus: int) -> np.ndarray:
    """Each GPU's switch, socket and server index (-1 on padded rows)."""
    out = np.full((max_gpus, len(GROUP_COLUMNS)), -1, dtype=np.int64)
    out[: topo.n_gpus] = np.stack([topo.gpu_switch, topo.gpu_socket, topo.gpu_server], axis=1)
    return out


def socket_rows(out: np.ndarray, topo: Topology, board: Board, part: PartialPlacement | None) -> None:
    """Rewrite the socket matrix ``out`` (padded rows stay zero): PSs and
    workers decided on each socket, its server's room, the job being placed's
    own tasks there."""
    S, V = topo.n_sockets, topo.n_servers
    ss = topo.socket_server
    occ = board.occ
    cores = occ.cores_free if part is None else part.cores_left
    mem = occ.mem_free if part is None else part.mem_left
    per_so = np.maximum(np.bincount(topo.gpu_socket, minlength=S), 1).astype(float)
    wk = np.bincount(topo.gpu_socket, weights=board.gpu_workers.astype(float), minlength=S)
    own_w = np.zeros(S)
    own_p = np.zeros(S)
    if part is not None:
        if part.gpus:
            own_w = np.bincount(topo.gpu_socket[part.gpus], minlength=S).astype(float)
        if part.sockets:
            own_p = np.bincount(np.asarray(part.sockets), minlength=S).astype(float)
    own_srv = np.bincount(ss, weights=own_w + own_p, minlength=V)
    o = out[:S]
    o[:, 0] = 1.0
    o[:, 1] = board.socket_ps / 4.0
    o[:, 2] = np.bincount(ss, weights=board.socket_ps.astype(float), minlength=V)[ss] / 4.0
    o[:, 3] = wk / per_so
    o[:, 4] = (cores / np.maximum(topo.server_cores, 1e-9))[ss]
    o[:, 5] = (mem / np.maximum(topo.server_mem_gb, 1e-9))[ss]
    o[:, 6] = own_w / per_so
    o[:, 7] = own_srv[ss] / WORKER_SCALE
    o[:, 8] = own_p / 4.0


def gpu_rows(out: np.ndarray, topo: Topology, board: Board, view: ClusterView, max_tasks: int,
             part: PartialPlacement | None) -> None:
    """Rewrite the GPU matrix ``out`` (padded rows stay zero) from the board
    and the job being placed (``part``: its own tasks so far)."""
    G = topo.n_gpus
    w = board.gpu_workers.astype(float)
    own = np.zeros(G)
    if part is not None and part.gpus:
        own[part.gpus] = 1.0
    others = w  # the board holds only decided jobs; the job being placed is in ``own``
    sw = np.bincount(topo.gpu_switch, weights=others, minlength=topo.n_switches)
    so = np.bincount(topo.gpu_socket, weights=others, minlength=topo.n_sockets)
    sv = np.bincount(topo.gpu_server, weights=others, minlength=topo.n_servers)
    per_sw = np.bincount(topo.gpu_switch, minlength=topo.n_switches).astype(float)
    per_so = np.bincount(topo.gpu_socket, minlength=topo.n_sockets).astype(float)
    per_sv = np.maximum(topo.server_gpus, 1).astype(float)
    ps_sv = np.bincount(topo.socket_server, weights=board.socket_ps, minlength=topo.n_servers)
    occ = board.occ
    cores = occ.cores_free if part is None else part.cores_left
    mem = occ.mem_free if part is None else part.mem_left
    gs, gk, gv = topo.gpu_switch, topo.gpu_socket, topo.gpu_server
    o = out[:G]
    o[:, 0] = 1.0
    o[:, 1] = topo.gpu_speed
    o[:, 2] = w / max_tasks
    o[:, 3] = view.gpu_tasks / max_tasks
    o[:, 4] = (sw / per_sw)[gs]
    o[:, 5] = (so / per_so)[gk]
    o[:, 6] = (sv / per_sv)[gv]
    o[:, 7] = board.socket_ps[gk] / 4.0
    o[:, 8] = ps_sv[gv] / 4.0
    o[:, 9] = (cores / np.maximum(topo.server_cores, 1e-9))[gv]
    o[:, 10] = (mem / np.maximum(topo.server_mem_gb, 1e-9))[gv]
    o[:, 11] = own
    o[:, 12] = (np.bincount(gv, weights=own, minlength=topo.n_servers) / per_sv)[gv]
    o[:, 13] = (np.bincount(gs, weights=own, minlength=topo.n_switches) / per_sw)[gs]
