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

from typing import TYPE_CHECKING

import numpy as np
from gymnasium import spaces

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.envs.board import LINK_KINDS, Board

if TYPE_CHECKING:  # (masks reads the columns: no import cycle)
    from hrlsched.envs.masks import PartialPlacement

WORKER_SCALE = 8.0  # workers and PSs are divided by this
HOUR = 3600.0
BIG = 1e6

JOB_FEATURES = (
    "valid", "is_current", "decided", "chosen_workers", "running", "workers", "ps",
    "log_age_h", "progress_frac", "log_remaining_h", "speed_vs_requested", "gain_one_more_worker",
    "params_gb", "sample_ms", "requested_gpus", "arch_ps", "mode_async", "arch_open", "mode_open",
    "log_restarts", "log_attained_gpu_h", "hint_workers",
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
    "log_hours_to_finish", "restarts_job", "servers_spanned", "share_of_free_gpus", "is_hint", "restart_cost",
)
RESTART_SCALE = 600.0  # a restart's delay (s) is divided by this
CLUSTER_FEATURES = (
    "log_time_h", "active_jobs", "queued_jobs", "free_gpus_decided", "free_gpus_before", "free_cores",
    "free_mem", "jobs_left_to_decide", "log_decision_points",
)
PHASES = ("allocate", "place_worker", "place_ps")
CONTEXT_FEATURES = (*(f"phase_{p}" for p in PHASES), "workers_left", "ps_left", "tasks_done")


class Columns(dict[str, int]):
    """The column of each feature of a matrix, by name (``JOB["params_gb"]``),
    so that the code that writes the rows names what it writes."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__((name, i) for i, name in enumerate(names))
        self.names = names

    def span(self, first: str, last: str) -> slice:
        """The columns ``first`` through ``last``, in the names' order (a
        run of columns written at once)."""
        i, j = self[first], self[last]
        if j < i:
            raise ValueError(f"span: {first!r} (column {i}) comes after {last!r} (column {j})")
        return slice(i, j + 1)


JOB = Columns(JOB_FEATURES)
GPU = Columns(GPU_FEATURES)
SOCKET = Columns(SOCKET_FEATURES)
LINK = Columns(LINK_FEATURES)
CANDIDATE = Columns(CANDIDATE_FEATURES)
CLUSTER = Columns(CLUSTER_FEATURES)
CONTEXT = Columns(CONTEXT_FEATURES)
# The candidate columns that change from one choice to the next (``observe``'s ``dyn``): speed over the
# request, hours to finish, servers spanned, share of the free GPUs, hint; the others depend only on the
# valid slots, the job's allocation and its restart delay.
DYN_FEATURES = ("speed_vs_requested", "log_hours_to_finish", "servers_spanned", "share_of_free_gpus", "is_hint")
DYN_COLUMNS = tuple(CANDIDATE[c] for c in DYN_FEATURES)


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
    out[:n, LINK["valid"]] = 1.0
    out[np.arange(n), LINK[f"kind_{LINK_KINDS[0]}"] + kind] = 1.0  # the kinds' columns in LINK_KINDS' order
    out[:n, LINK["capacity_100gbps"]] = cap / 100.0
    return out


def link_utilisation(perf: object, view: ClusterView, n_links: int) -> np.ndarray | None:
    """Each physical link's load over its capacity (the busier direction),
    from the analytic model's traffic of the running jobs at their measured
    speeds; None when the model exposes no traffic."""
    traffic = getattr(perf, "traffic_many", None)
    capacity = getattr(perf, "capacity", None)
    if traffic is None or capacity is None or getattr(perf, "n_links", -1) != n_links:
        return None
    pls = view.placements
    run = [i for i in np.flatnonzero(view.speed > 0).tolist() if pls[i] is not None]  # numpy finds the running jobs
    if not run:
        return np.zeros(n_links)
    bs = view.batch_sizes[run]
    rows = traffic([view.jobs[i] for i in run], [pls[i] for i in run], bs)
    rate = view.speed[run] / bs
    # bytes x rate row by row, as one product over the rows (each job's rate repeated)
    weights = np.concatenate([r[1] for r in rows]) * np.repeat(rate, [r[0].size for r in rows])
    load = np.bincount(np.concatenate([r[0] for r in rows]), weights=weights, minlength=2 * n_links)
    u = load / capacity
    return np.maximum(u[:n_links], u[n_links:])


def gpu_groups(topo: Topology, max_gpus: int) -> np.ndarray:
    """Each GPU's switch, socket and server index (-1 on padded rows)."""
    out = np.full((max_gpus, len(GROUP_COLUMNS)), -1, dtype=np.int64)
    out[: topo.n_gpus] = np.stack([topo.gpu_switch, topo.gpu_socket, topo.gpu_server], axis=1)
    return out


# The columns ``Rows`` writes: single ones, and runs written at once (one gather from the board's figures
# fills the columns others_on_switch through server_mem_free of a GPU, ps_decided through server_mem_free
# of a socket, in those orders).
_G_VALID, _G_SPEED, _G_DECIDED, _G_BEFORE = GPU["valid"], GPU["speed"], GPU["tasks_decided"], GPU["tasks_before"]
_G_OWN_GPU, _G_OWN_SERVER, _G_OWN_SWITCH = GPU["own_on_gpu"], GPU["own_on_server"], GPU["own_on_switch"]
_G_BOARD, _G_ROOM, _G_OWN = (GPU.span("others_on_switch", "server_mem_free"),
                             GPU.span("server_cores_free", "server_mem_free"), GPU.span("own_on_gpu", "own_on_switch"))
_S_VALID, _S_OWN_WORKERS = SOCKET["valid"], SOCKET["own_workers_on_socket"]
_S_OWN_SERVER, _S_OWN_PS = SOCKET["own_on_server"], SOCKET["own_ps_on_socket"]
_S_BOARD, _S_ROOM, _S_OWN = (SOCKET.span("ps_decided", "server_mem_free"),
                             SOCKET.span("server_cores_free", "server_mem_free"),
                             SOCKET.span("own_workers_on_socket", "own_ps_on_socket"))


class Rows:
    """The GPU and socket matrices of a decision point (padded rows stay
    zero): ``rewrite`` recomputes them from the board and the job being
    placed (``part``: its own tasks so far, and the room it leaves);
    ``worker``/``ps`` update only the rows that one more task of ``part``
    changes (its GPU, its server's GPUs and sockets, its switch's GPUs), to
    the same values."""

    def __init__(self, topo: Topology, max_gpus: int, max_sockets: int, max_tasks: int) -> None:
        self.topo = topo
        self.max_tasks = max_tasks
        G, S, V = topo.n_gpus, topo.n_sockets, topo.n_servers
        self.per_sw = np.bincount(topo.gpu_switch, minlength=topo.n_switches).astype(float)
        self.per_so_g = np.bincount(topo.gpu_socket, minlength=S).astype(float)  # GPUs per socket
        self.per_so = np.maximum(self.per_so_g, 1)
        self.per_sv = np.maximum(topo.server_gpus, 1).astype(float)
        self.cores_cap = np.maximum(topo.server_cores, 1e-9)
        self.mem_cap = np.maximum(topo.server_mem_gb, 1e-9)
        # Each group's rows: a slice where they are contiguous (the usual numbering), which
        # numpy writes faster than an index array (``worker``/``ps``, several writes per task).
        self.switch_gpus = [_rows(topo.gpu_switch == w) for w in range(topo.n_switches)]
        self.server_gpus = [_rows(topo.gpu_server == v) for v in range(V)]
        self.server_sockets = [_rows(topo.socket_server == v) for v in range(V)]
        self._gpu_svk = list(zip(topo.gpu_server.tolist(), topo.gpu_switch.tolist(), topo.gpu_socket.tolist()))
        self._sock_server = topo.socket_server.tolist()
        self.gpus = np.zeros((max_gpus, len(GPU_FEATURES)), dtype=np.float32)
        self.sockets = np.zeros((max_sockets, len(SOCKET_FEATURES)), dtype=np.float32)
        self.gpus[:G, _G_VALID] = 1.0
        self.gpus[:G, _G_SPEED] = topo.gpu_speed
        self.sockets[:S, _S_VALID] = 1.0
        # ``rewrite`` in few array operations: the workers per switch, socket and
        # server summed by one bincount (each bin's terms in the same order as
        # its own bincount), the per-group figures in one vector, gathered.
        W = topo.n_switches
        self._grp = np.concatenate([topo.gpu_switch, W + topo.gpu_socket, W + S + topo.gpu_server])
        self._grp_src = np.tile(np.arange(G), 3)
        self._grp_n = W + S + V
        self._grp_div = np.concatenate([self.per_sw, self.per_so_g, self.per_sv])
        # vec = [sums / divisors (W + S + V), socket PSs / 4 (S), server PSs / 4 (V), cores (V), memory (V),
        #        workers per socket / GPUs per socket at least 1 (S)]
        o1 = W + S + V
        o2, o3, o4, o5 = o1 + S, o1 + S + V, o1 + S + 2 * V, o1 + S + 3 * V
        gs, gk, gv, ss = topo.gpu_switch, topo.gpu_socket, topo.gpu_server, topo.socket_server
        self._g7 = np.stack([gs, W + gk, W + S + gv, o1 + gk, o2 + gv, o3 + gv, o4 + gv], axis=1)  # _G_BOARD
        s_ = np.arange(S)
        self._s5 = np.stack([o1 + s_, o2 + ss, o5 + s_, o3 + ss, o4 + ss], axis=1)  # _S_BOARD
        self._ws = slice(W, W + S)
        self._own_clear = True  # the own-task columns are zero

    def point(self, view: ClusterView) -> None:
        """What does not move during a point: the tasks on each GPU before it."""
        self.gpus[: self.topo.n_gpus, _G_BEFORE] = view.gpu_tasks / self.max_tasks

    def rewrite(self, board: Board, part: PartialPlacement | None) -> None:
        topo = self.topo
        G, S, V = topo.n_gpus, topo.n_sockets, topo.n_servers
        gs, gv, ss = topo.gpu_switch, topo.gpu_server, topo.socket_server
        occ = board.occ
        cores = occ.cores_free if part is None else part.cores_left
        mem = occ.mem_free if part is None else part.mem_left
        w = board.gpu_workers.astype(float)  # the board holds only decided jobs; the job being placed is ``own``
        sums = np.bincount(self._grp, weights=w[self._grp_src], minlength=self._grp_n)
        sp = board.socket_ps
        ps_sv = np.bincount(ss, weights=sp, minlength=V)
        vec = np.concatenate([sums / self._grp_div, sp / 4.0, ps_sv / 4.0, cores / self.cores_cap,
                              mem / self.mem_cap, sums[self._ws] / self.per_so])
        o = self.gpus[:G]
        o[:, _G_DECIDED] = w / self.max_tasks
        o[:, _G_BOARD] = vec[self._g7]
        so = self.sockets[:S]
        so[:, _S_BOARD] = vec[self._s5]
        if part is None or not (part.gpus or part.sockets):
            if not self._own_clear:
                o[:, _G_OWN] = 0.0
                so[:, _S_OWN] = 0.0
                self._own_clear = True
            return
        self._own_clear = False
        own = np.zeros(G)
        own[part.gpus] = 1.0
        own_w = part.workers_on_socket.astype(float)
        own_p = part.ps_on_socket.astype(float)
        o[:, _G_OWN_GPU] = own
        o[:, _G_OWN_SERVER] = (part.workers_on_server / self.per_sv)[gv]
        o[:, _G_OWN_SWITCH] = (part.workers_on_switch / self.per_sw)[gs]
        so[:, _S_OWN_WORKERS] = own_w / self.per_so
        so[:, _S_OWN_SERVER] = np.bincount(ss, weights=own_w + own_p, minlength=V)[ss] / WORKER_SCALE
        so[:, _S_OWN_PS] = own_p / 4.0

    def _room(self, part: PartialPlacement, v: int) -> None:
        g, s = self.server_gpus[v], self.server_sockets[v]
        c = part.cores_left[v] / self.cores_cap[v]
        m = part.mem_left[v] / self.mem_cap[v]
        self.gpus[g, _G_ROOM] = (c, m)  # both columns in one assignment (the same float32 values)
        self.sockets[s, _S_ROOM] = (c, m)
        self.sockets[s, _S_OWN_SERVER] = part.on_server[v] / WORKER_SCALE

    def worker(self, part: PartialPlacement, g: int) -> None:
        """``part`` has just put a worker on GPU ``g``."""
        self._own_clear = False
        v, w, k = self._gpu_svk[g]
        self.gpus[g, _G_OWN_GPU] = 1.0
        self.gpus[self.server_gpus[v], _G_OWN_SERVER] = part.workers_on_server[v] / self.per_sv[v]
        self.gpus[self.switch_gpus[w], _G_OWN_SWITCH] = part.workers_on_switch[w] / self.per_sw[w]
        self.sockets[k, _S_OWN_WORKERS] = part.workers_on_socket[k] / self.per_so[k]
        self._room(part, v)

    def ps(self, part: PartialPlacement, sock: int) -> None:
        """``part`` has just put a PS on socket ``sock``."""
        self._own_clear = False
        self.sockets[sock, _S_OWN_PS] = part.ps_on_socket[sock] / 4.0
        self._room(part, self._sock_server[sock])


def _rows(member: np.ndarray) -> slice | np.ndarray:
    """The indices where ``member`` holds: a slice where they are contiguous, else an index array."""
    ix = np.flatnonzero(member)
    if ix.size and ix[-1] - ix[0] + 1 == ix.size:
        return slice(int(ix[0]), int(ix[-1]) + 1)
    return ix
