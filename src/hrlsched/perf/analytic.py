"""The topology-aware analytic performance model (the default backend).

Time per iteration of job j (design.md, "The analytic performance model"):

    t_j = max_i [(theta0 * local_batch / g_i * k_i + theta1) * c_i]   compute, slowest worker i (sync)
          * (1 + straggler * (w - 1))                               wait for the slowest (sync)
        + theta3 * w + theta4 * p                                   per-worker/PS overheads (Optimus)
        + max_l bytes_{j,l} * rho_l / C_l                           communication bottleneck

- g_i: relative speed of the job's model on worker i's GPU type
  (``Topology.type_speed``: Gavel's per-model throughputs where measured,
  ``cluster.gpu_speed``); k_i: workers time-sharing its
  GPU; c_i = 1 + s_j * pressure_i: compute interference, with s_j the
  model's sensitivity and pressure_i the other tasks on worker i's CPU
  socket (the job's own other workers and PSs included) per GPU of that
  socket (cache, memory bandwidth, input pipeline). s_j is fitted on the
  Pollux single-server measurements (``calibration.colocation``). To
  measure its parts, ``pressure_from`` counts only the job's own tasks
  (``own``: co-located jobs cost nothing) or only workers (``workers``: PSs
  press on no one) instead of every task (``tasks``, the model).
- Links l: each GPU's PCIe link to its switch, each switch's uplink to its
  socket, the QPI/UPI link of each server, each server's NIC, each rack's
  uplink, and each server's NVLink fabric where present. C_l: capacity.
- Traffic per iteration: a PS job's worker exchanges its gradient shard S/p
  with each PS (GPU -> switch -> socket, then QPI to a PS on the other
  socket, or NICs and rack uplinks to a PS on another server), S/p in each
  direction (push and pull); an all-reduce job runs a ring over its workers
  (2 (w - 1) / w * S per ring edge, one direction of each link it crosses;
  NVLink inside a server where present); every worker also loads its input
  (local batch x input bytes per sample) from host memory through its switch,
  across QPI when the worker sits on the other socket than the job's CPU home
  on that server (the socket with most of its tasks there).
- Sharing: DL traffic comes in bursts (one per iteration), so a job's
  transfer is slowed by the neighbours that transmit at the same time:
  with u_k,l = (bytes_k,l / C_l) / t_k the share of its iteration job k
  keeps link l busy, j's time on l is stretched by
  rho_j,l = max(1 + kappa sum_{k != j} u_k,l, sum_k u_k,l) (expected overlap
  of independent bursts, kappa = 1; the fluid limit once the link is
  saturated). ``contention`` kappa defaults to the value fitted on
  DeepShare's measured sharing matrix (``perf/interference.yaml``, written
  by ``python -m hrlsched.calibration.interference --write``: 1.52). u
  depends on speed, so t and rho are iterated to a fixed point
  (``iterations``, 3).
- S = theta2 x ``ref_gbps``: the bytes that cost theta2 seconds at the
  bandwidth at which theta2 was measured. With one PS job on a network whose
  links all have ``ref_gbps`` and its PSs on other servers, t reduces to the
  Optimus form theta0 M/w + theta1 + theta2 w/p + theta3 w + theta4 p
  (for w >= p; a test checks this).
- Options fitted on the Pollux testbed (``calibration.heldout``; neutral by
  default): ``intra_server_bytes="params"`` moves the real gradient size
  (``params_mb``) inside a server and theta2-sized bytes only over NICs and
  rack links; ``ring_spread_eff`` scales a ring's network time when it spans
  three or more servers (measured: 0.63, a 2-server ring is slower per
  byte); ``host_staging`` adds that share of its network time per extra
  worker of the job on its busiest server (no GPUDirect: transfers are
  staged through the host); ``straggler`` is the synchronisation wait per
  extra worker, as a share of compute.
- Async jobs (parameter server only; ``perf.asynchrony``): no barrier, so
  no straggler wait; each worker runs at its own pace on its own mini-batch
  (``batch_size``) and the job's speed is the sum of its workers' local
  batch / t_i, with t_i its own compute plus the job's overheads and its
  communication bottleneck (the PS links are still shared, with the job's
  other workers and with other jobs). Staleness costs statistical
  efficiency (``efficiency``, ``perf.options.staleness_penalty``). Async
  all-reduce is refused with a ValueError.

Per-job traffic (the (link, bytes) rows) is cached per placement
signature. Where a job's paths go depends only on its placement and the
kinds of traffic it has; those are routed once and kept (``_Routed``), all
new ones of a build in one pass: their paths listed task by task (Python
numbers: a build has a job or two), routed from a per-topology table (or
with masks, on a large topology). A job's bytes per path come from its
model and batch size, summed per link with ``np.bincount`` (no loop over
links). A call with the same jobs and placements as the last one
returns its result; otherwise the fixed point is re-solved for all jobs at
once, vectorised over all (job, link) rows. (Re-solving only the connected
groups of jobs whose neighbourhood changed was tried and measured slower:
7.8 ms against 2.9 ms for 500 jobs on 4,096 GPUs after one job moved, since
finding the groups costs more than one vectorised solve.)
Links are full duplex: each direction has the link's capacity and its own
load (so a ring's edge into a server and the edge out of it do not share).
Where it simplifies: compute
and communication do not overlap; pressure counts tasks, not their
intensity; the CPU home of a job's input pipeline is inferred, not placed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.core.catalogue import ModelProfile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.perf.asynchrony import DEFAULT_STALENESS_PENALTY, refuse_async_allreduce
from hrlsched.perf.base import PerformanceModel, theta_speed_ceiling

# Fitted by ``python -m hrlsched.calibration.interference --write DATA``.
PARAMS_FILE = Path(__file__).with_name("interference.yaml")


def load_params(path: str | Path = PARAMS_FILE) -> dict[str, float]:
    """The fitted interference parameters (``contention``) the analytic model uses."""
    import yaml

    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    k = data.get("contention")
    if not isinstance(k, (int, float)) or k < 0:
        raise ValueError(f"{path}: field 'contention': expected a number >= 0, got {k!r}")
    return {"contention": float(k)}

GBPS = 1e9 / 8  # bytes per second in one Gbit/s
# Paths (GPUs x (GPUs + sockets)) up to which the routes are tabulated per topology, both ways
# (at most about 20 MB; 64 GPUs and 16 sockets: 5,120 paths), and (job, link) keys up to which
# traffic is summed with a dense bincount rather than np.unique (two arrays of at most 32 MB for
# a moment: a menu of a thousand allocations on 1,024 GPUs is summed without sorting).
_ROUTE_TABLE_MAX = 1 << 18
_DENSE_KEYS_MAX = 1 << 22
# (worker, PS) pairs of a job above which its push paths are made with numpy, not as Python ints.
_PAIRS_IN_PYTHON = 64
# Most jobs solved alone as copies in a joint solve (``speeds_and_alone``).
_ALONE_COPIES_MAX = 3


# What presses on a worker's socket (``perf.options.pressure_from``): every other task there
# (the model), or, to measure the parts of that cost, only the job's own tasks (co-located jobs
# cost nothing) or only workers (parameter servers press on no one).
PRESSURE_FROM = ("tasks", "own", "workers")


class AnalyticModel(PerformanceModel):
    name = "analytic"
    isolated_is_alone = True  # the isolated solve is the one-job solve, job by job (tested)

    def __init__(
        self,
        topology: Topology,
        catalogue: Mapping[str, ModelProfile],
        ref_gbps: float = 25.0,
        iterations: int = 3,
        interference_scale: float = 1.0,
        contention: float | None = None,
        intra_server_bytes: str = "theta2",
        ring_spread_eff: float = 1.0,
        host_staging: float = 0.0,
        straggler: float = 0.0,
        staleness_penalty: float = DEFAULT_STALENESS_PENALTY,
        pressure_from: str = "tasks",
    ) -> None:
        super().__init__(topology, catalogue, staleness_penalty)
        if ref_gbps <= 0:
            raise ValueError(f"perf.options.ref_gbps: expected > 0, got {ref_gbps}")
        if iterations < 1:
            raise ValueError(f"perf.options.iterations: expected >= 1, got {iterations}")
        self.ref_bytes_s = ref_gbps * GBPS
        self.iterations = int(iterations)
        self.interference_scale = float(interference_scale)
        if contention is None:  # fitted on DeepShare's sharing matrix (perf/interference.yaml)
            contention = load_params()["contention"]
        if contention < 0:
            raise ValueError(f"perf.options.contention: expected >= 0, got {contention}")
        self.contention = float(contention)
        if intra_server_bytes not in ("theta2", "params"):
            raise ValueError(f"perf.options.intra_server_bytes: expected 'theta2' or 'params', got {intra_server_bytes!r}")
        self.intra_params = intra_server_bytes == "params"
        if pressure_from not in PRESSURE_FROM:
            raise ValueError(f"perf.options.pressure_from: expected one of {', '.join(PRESSURE_FROM)}, got {pressure_from!r}")
        self.pressure_from = pressure_from
        for name, v, lo in (("ring_spread_eff", ring_spread_eff, 1e-9), ("host_staging", host_staging, 0.0), ("straggler", straggler, 0.0)):
            if not v >= lo:
                raise ValueError(f"perf.options.{name}: expected {'> 0' if lo else '>= 0'}, got {v}")
        self.ring_spread_eff, self.host_staging, self.straggler = float(ring_spread_eff), float(host_staging), float(straggler)
        # whether gradient bytes on network links are scaled (with the neutral options every factor is 1)
        self._scales_net = self.intra_params or self.ring_spread_eff != 1.0 or self.host_staging != 0.0
        t = topology
        G, S, V, R = t.n_gpus, t.n_switches, t.n_servers, t.n_racks
        self.off_switch, self.off_qpi, self.off_nic, self.off_rack, self.off_nvl = G, G + S, G + S + V, G + S + 2 * V, G + S + 2 * V + R
        nvl = t.nvlink_gbps * np.maximum(t.server_gpus, 1)  # aggregate NVLink fabric of a server
        cap = np.concatenate([t.pcie_gbps, t.switch_uplink_gbps, t.qpi_gbps, t.nic_gbps, t.rack_uplink_gbps, nvl])
        # Full duplex: link id l is the direction leaving the source side of a
        # path, l + n_links the direction entering the destination side.
        self.n_links = cap.size
        self.capacity = np.tile(np.where(cap > 0, cap, np.inf) * GBPS, 2)
        self.socket_gpus = np.bincount(t.gpu_socket, minlength=t.n_sockets).astype(float)
        self._rows: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._routed: dict[tuple, _Routed] = {}  # per (placement, kinds of traffic): see _build_traffic
        self._route_table: np.ndarray | None = None  # see _paths
        # the topology's maps as Python lists (read per task where a build has a few tasks)
        self._gpu_socket_l, self._gpu_server_l = t.gpu_socket.tolist(), t.gpu_server.tolist()
        self._socket_server_l = t.socket_server.tolist()
        self._socket_gpus_l = self.socket_gpus.tolist()
        self._gpu_speed_l: dict[str, list[float]] = {}  # see _gpu_speeds
        self._terms: dict[tuple, _Terms] = {}  # per (model, arch, mode, batch, placement): see _job_terms
        self._last: tuple | None = None

    def _pressing(self, per_w: np.ndarray, workers: list[int], isolated: bool) -> np.ndarray:
        """Per worker, the tasks counted on its socket under ``pressure_from``
        ``own`` or ``workers`` (itself included)."""
        if self.pressure_from == "own":
            return per_w[5]
        sock = per_w[7].astype(np.intp)
        if isolated:  # each job's own workers only: count per (job, socket)
            sock = np.repeat(np.arange(len(workers)), workers) * (int(sock.max(initial=0)) + 1) + sock
        return np.bincount(sock)[sock].astype(float)

    def _bound_caches(self) -> None:
        """Drop every per-placement cache (terms, traffic rows, routes, alone
        speeds) once one passes ``cache_entries``."""
        if len(self._terms) > self.cache_entries or len(self._rows) > self.cache_entries \
                or len(self._alone_cache) > self.cache_entries:
            for c in (self._terms, self._rows, self._routed, self._alone_cache):
                c.clear()

    # ------------------------------------------------------------ traffic
    def _route(self, a: np.ndarray, dst_socket: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Directed links of the paths from GPUs ``a`` to GPUs ``b`` or, where
        ``b`` is -1, to sockets ``dst_socket`` (a PS, host memory): (path
        index, link id) incidence rows, one per link a path crosses, path by
        path; source-side links in their outgoing direction (id),
        destination-side ones in their incoming direction (id + n_links)."""
        t, D = self.topology, self.n_links
        to_gpu = b >= 0
        bb = np.where(to_gpu, b, 0)
        sa, va, wa, wb = t.gpu_socket[a], t.gpu_server[a], t.gpu_switch[a], t.gpu_switch[bb]
        nvl = to_gpu & (va == t.gpu_server[bb]) & (t.nvlink_gbps[va] > 0)  # the server's NVLink fabric only
        pcie = ~nvl
        up = pcie & ~(to_gpu & (wa == wb))
        sb = np.where(to_gpu, t.gpu_socket[bb], dst_socket)
        vb = t.socket_server[sb]
        cross = up & (sa != sb)
        net = cross & (va != vb)
        ra, rb = t.server_rack[va], t.server_rack[vb]
        rack = net & (ra != rb)
        # One row per (link kind, path); QPI/UPI: one direction from the lower socket to the higher,
        # the other back.
        links = np.concatenate([self.off_nvl + va, a, D + bb, self.off_switch + wa, D + self.off_switch + wb,
                                self.off_qpi + va + np.where(sa < sb, 0, D), self.off_nic + va,
                                D + self.off_nic + vb, self.off_rack + ra, D + self.off_rack + rb]).reshape(10, -1)
        on = np.concatenate([nvl, pcie, pcie & to_gpu, up, up & to_gpu, cross & (va == vb), net, net, rack,
                             rack]).reshape(10, -1)
        path, kind = np.nonzero(on.T)  # path by path
        return path, links[kind, path]

    def _paths(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The directed links of paths ``idx``, each ``a * m + c`` for a path
        from GPU ``a`` (``m``: GPUs + sockets) to GPU ``c`` or, where ``c >= G``,
        to socket ``c - G``, plus ``G * m`` for the same path the other way
        (each link in its other direction: a pull, an input read): (path
        index, link id) incidence rows, path by path, in ``_route``'s order.
        Read from a table of every path of the topology (routed once, on first
        use) where that table is small: one lookup instead of some thirty
        numpy calls per build."""
        t = self.topology
        G, m, D = t.n_gpus, t.n_gpus + t.n_sockets, self.n_links
        if G * m > _ROUTE_TABLE_MAX:
            rev = idx >= G * m
            a, col = np.divmod(np.where(rev, idx - G * m, idx), m)
            path, link = self._route(a, np.maximum(col - G, 0), np.where(col < G, col, -1))
            return path, np.where(rev[path], (link + D) % (2 * D), link)
        tab = self._route_table
        if tab is None:
            col = np.tile(np.arange(m), G)
            path, link = self._route(np.repeat(np.arange(G), m), np.maximum(col - G, 0), np.where(col < G, col, -1))
            cnt = np.bincount(path, minlength=G * m)
            tab = np.full((G * m, int(cnt.max())), -1, dtype=np.int32)  # a path's links in _route's order, -1 after
            tab[path, np.arange(path.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)] = link
            # then every path the other way: the same links in their other direction
            tab = self._route_table = np.concatenate([tab, np.where(tab >= 0, (tab + D) % (2 * D), -1)])
        rows = tab[idx]
        path, kind = (rows >= 0).nonzero()  # path by path
        return path, rows[path, kind]

    def _build_traffic(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(link ids, bytes per iteration) of each job. Where a job's paths go
        depends only on its placement and the kinds of traffic it has
        (``_Routed``, made once for each and kept: a menu's thousand
        allocations are a few dozen placements); its bytes per path on its
        model and batch size. A job's rows (pushes, pulls, input reads, ring
        edges, path by path in ``_route``'s order) are summed per link in that
        order (bincount), as they always were."""
        scaled = self._scales_net
        gsrv = self._gpu_server_l
        per_job = []  # (routing key, bytes per kind of path, factor on network gradient bytes)
        for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist()):
            pr = self.profile(j)
            w, p = len(pl.gpus), len(pl.ps_sockets)
            S = pr.theta[2] * self.ref_bytes_s
            P = pr.params_mb * 1e6
            grad = (P if P > 0 else S) if self.intra_params else S
            local = b / w if j.mode == "sync" else float(b)
            push = j.arch == "ps" and p > 0  # every worker exchanges its shard S/p with every PS
            inp = local * pr.input_mb_per_sample * 1e6
            ring = j.arch == "allreduce" and w > 1  # each worker sends 2 (w - 1) / w S to the next
            vals = (grad / p if push else 0.0, inp if inp > 0 else 0.0, 2.0 * (w - 1) / max(w, 1) * grad if ring else 0.0)
            f = 1.0
            if scaled:
                # servers spanned and most workers on one server (rings: the measured spread
                # efficiency and host staging)
                per_srv: dict[int, int] = {}
                for g in pl.gpus:
                    per_srv[gsrv[g]] = per_srv.get(gsrv[g], 0) + 1
                ring_f = (self.ring_spread_eff if len(per_srv) > 2 else 1.0) * \
                    (1.0 + self.host_staging * (max(per_srv.values()) - 1))
                f = (S / grad if grad > 0 else 1.0) * (ring_f if ring else 1.0)
            per_job.append(((pl, push, inp > 0, ring), vals, f))
        routed = self._routed
        todo = list(dict.fromkeys(k for k, _, _ in per_job if k not in routed))
        if todo:
            for k, r in zip(todo, self._route_kinds(todo)):
                routed[k] = r
        out = []
        for k, vals, f in per_job:
            r = routed[k]
            row_bytes = np.array(vals)[r.kind]
            if r.on_net is not None:  # gradient bytes on network links (NIC, rack uplink): theta2-sized, rings scaled
                row_bytes = row_bytes * np.where(r.on_net, f, 1.0)
            out.append((r.links, np.bincount(r.inv, weights=row_bytes, minlength=r.links.size)))
        return out

    def _route_kinds(self, keys: list[tuple]) -> list[_Routed]:
        """The ``_Routed`` of each (placement, pushes, input reads, ring): the
        paths of all of them listed (their tasks, as Python numbers), routed
        in one ``_paths`` call, then split per placement."""
        t = self.topology
        G = t.n_gpus
        m, rev = G + t.n_sockets, G * (G + t.n_sockets)  # a path's index: see _paths
        gsock, gsrv, ssrv = self._gpu_socket_l, self._gpu_server_l, self._socket_server_l
        paths: list[np.ndarray | list[int]] = []  # per key: its paths, in the rows' order
        kinds: list[list[int]] = []  # per key: the kind of each path (0 push or pull, 1 input, 2 ring edge)
        for pl, push, inp, ring in keys:
            gpus = sorted(pl.gpus)  # the ring's order
            ps = pl.ps_sockets
            w, p = len(gpus), len(ps)
            ix: np.ndarray | list[int] = []
            n_push = 0
            if push:
                if w * p <= _PAIRS_IN_PYTHON:
                    pu = [g * m + c for g in gpus for c in [G + s for s in ps]]
                    ix = pu + [rev + x for x in pu]  # pull (PS -> worker): each push the other way
                else:  # many pairs (a large job with many PSs, in a menu's pricing): numpy
                    pa = ((np.array(gpus, dtype=np.int64) * m)[:, None] + np.array([G + s for s in ps], dtype=np.int64)).ravel()
                    ix = np.concatenate([pa, pa + rev])
                n_push = 2 * w * p
            more: list[int] = []
            n_inp = 0
            if inp:
                # Input pipeline: from the job's CPU home on each server (the socket with most
                # of its tasks there; the lowest on a tie) to each worker.
                tasks = [gsock[g] for g in gpus] + list(ps)  # the socket of each task
                home: dict[int, int] = {}
                for s in sorted(set(tasks)):
                    h = home.get(ssrv[s])
                    if h is None or tasks.count(s) > tasks.count(h):
                        home[ssrv[s]] = s
                more += [rev + g * m + G + home[gsrv[g]] for g in gpus]  # host -> GPU: the path the other way
                n_inp = w
            if ring:  # cyclic, sorted order
                more += [g * m + nxt for g, nxt in zip(gpus, gpus[1:] + gpus[:1])]
            if more:
                ix = np.concatenate([np.asarray(ix, dtype=np.int64), np.array(more, dtype=np.int64)]) \
                    if isinstance(ix, np.ndarray) else ix + more
            paths.append(ix)
            kinds.append([0] * n_push + [1] * n_inp + [2] * (len(more) - n_inp))
        if len(paths) == 1:
            pi, link = self._paths(np.asarray(paths[0], dtype=np.int64))
        else:
            pi, link = self._paths(np.concatenate([np.asarray(x, dtype=np.int64) for x in paths]))
        link = link.astype(np.int64, copy=False)  # (the route table's are int32)
        kind = np.array([k for ks in kinds for k in ks], dtype=np.int64)[pi]
        net = None
        if self._scales_net:
            phys = link % self.n_links
            # rows of gradient traffic (pushes, pulls, ring edges) on network links
            net = (kind != 1) & (phys >= self.off_nic) & (phys < self.off_nvl)
        # Each key's links (sorted) and each row's index among them, for all keys at once: the
        # (key, link) pairs summed as ``_solve``'s rows are, dense where they are few.
        K, L = len(keys), self.capacity.size
        if K == 1:
            pair = link
            rc = [0, int(pi.size)]
        else:
            starts = [0, *itertools.accumulate(len(x) for x in paths)]
            rc = np.searchsorted(pi, starts).tolist()  # each key's rows: its paths are a run of path indices
            pair = np.repeat(np.arange(K), np.diff(rc)) * L + link
        if K * L <= _DENSE_KEYS_MAX:
            uniq = np.flatnonzero(np.bincount(pair))
            inv = np.searchsorted(uniq, pair)
        else:
            uniq, inv = np.unique(pair, return_inverse=True)
        if K == 1:
            kc, links = [0, int(uniq.size)], uniq
        else:
            kc, links = np.searchsorted(uniq, [i * L for i in range(K + 1)]).tolist(), uniq % L
        out = []
        for i in range(K):
            a, b = rc[i], rc[i + 1]
            out.append(_Routed(links=links[kc[i]:kc[i + 1]], inv=inv[a:b] - kc[i] if kc[i] else inv[a:b],
                               kind=kind[a:b], on_net=None if net is None else net[a:b]))
        return out

    def _traffic_rows(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Traffic of each job, from the cache or built (in one pass) for the missing ones."""
        keys = [(j.model, j.arch, j.mode, b, pl) for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist())]
        out = [*map(self._rows.get, keys)]  # one lookup per job (a placement's hash is Python code)
        miss = [i for i, x in enumerate(out) if x is None]
        if miss:
            built = self._build_traffic([jobs[i] for i in miss], [placements[i] for i in miss],
                                        np.asarray(batch)[miss])
            for i, r in zip(miss, built):
                out[i] = self._rows[keys[i]] = r
        return out  # type: ignore[return-value]

    def traffic(self, job: Job, pl: Placement, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(link ids, bytes per iteration) of one job at one placement."""
        self._bound_caches()
        return self._traffic_rows([job], [pl], np.array([batch]))[0]

    def traffic_many(self, jobs: Sequence[Job], placements: Sequence[Placement],
                     batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``traffic`` of many jobs at once."""
        self._bound_caches()
        return self._traffic_rows(jobs, placements, batch)

    # ------------------------------------------------------------- speeds
    def speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        n = len(jobs)
        if n == 0:
            return np.zeros(0)
        batch = np.array([j.batch_size for j in jobs], dtype=np.int64) if batch_sizes is None else np.asarray(batch_sizes, dtype=np.int64)
        # The jobs themselves (equal jobs have equal speeds; the same objects compare at once),
        # not their ids: an id may name another job (another workload, or the same job with
        # another architecture or mode at the same placement).
        sig = (tuple(jobs), tuple(placements), batch.tobytes())
        if self._last is not None and self._last[0] == sig:
            return self._last[1].copy()
        self._bound_caches()
        out = self._solve(jobs, placements, batch, isolated=False)
        self._last = (sig, out.copy())
        return out

    def speeds_and_alone(self, jobs: Sequence[Job], placements: Sequence[Placement], batch_sizes: np.ndarray,
                         alone: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``speeds``, and ``alone_speeds`` of the jobs at positions ``alone``
        (through its cache): the alone speeds not kept yet, where they are a
        few, are solved in the same pass as the joint speeds (``_solve``'s
        ``alone``), the same numbers as an isolated solve."""
        self._bound_caches()
        batch = np.asarray(batch_sizes, dtype=np.int64)
        b = batch.tolist()
        keys = [(jobs[i].model, jobs[i].arch, jobs[i].mode, b[i], placements[i].canonical()) for i in alone]
        miss: dict[tuple, int] = {}  # the first position of each key not kept yet
        for i, k in zip(alone, keys):
            if k not in self._alone_cache:
                miss.setdefault(k, i)
        sig = (tuple(jobs), tuple(placements), batch.tobytes())  # (as ``speeds``')
        # (many at once, as an allocation's restarts: one isolated solve of them all is cheaper than copies)
        if not miss or len(miss) > _ALONE_COPIES_MAX or (self._last is not None and self._last[0] == sig):
            return super().speeds_and_alone(jobs, placements, batch, alone)
        out = self._solve(jobs, placements, batch, isolated=False, alone=list(miss.values()))
        n = len(jobs)
        for k, v in zip(miss, out[n:].tolist()):
            self._alone_cache[k] = v
        self._last = (sig, out[:n].copy())
        return out[:n], np.array([self._alone_cache[k] for k in keys], dtype=float)

    def speed_ceiling(self, job: Job, n_workers: np.ndarray) -> np.ndarray:
        return theta_speed_ceiling(job, self.profile(job), n_workers, float(self.topology.type_speed(job.model).max()))

    def isolated_speeds(
        self,
        jobs: Sequence[Job],
        placements: Sequence[Placement],
        batch_sizes: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each job's speed alone on the cluster at its placement (as
        ``alone_speed``), for many (job, placement) pairs in one vectorised
        solve: the pairs do not see each other."""
        if not jobs:
            return np.zeros(0)
        self._bound_caches()
        batch = np.array([j.batch_size for j in jobs], dtype=np.int64) if batch_sizes is None else np.asarray(batch_sizes, dtype=np.int64)
        return self._solve(jobs, placements, batch, isolated=True)

    def _job_terms(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[_Terms]:
        """The terms of ``_solve`` that depend only on each job (model, mode,
        batch size, placement), from the cache or built (in one pass) for the
        missing ones: the same expressions as a whole solve, split by job."""
        keys = [(j.model, j.arch, j.mode, b, pl) for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist())]
        out = [*map(self._terms.get, keys)]  # one lookup per job (a placement's hash is Python code)
        miss = [i for i, x in enumerate(out) if x is None]
        if miss:
            mj, mp = [jobs[i] for i in miss], [placements[i] for i in miss]
            for i, terms in zip(miss, self._build_terms(mj, mp, np.asarray(batch, dtype=np.int64)[miss])):
                out[i] = self._terms[keys[i]] = terms
        return out  # type: ignore[return-value]

    def _build_terms(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[_Terms]:
        # Per worker, as Python numbers in one pass (a build has a job or two: see _build_traffic):
        # theta0 * local batch / GPU speed (times the time-sharing in a solve), theta1,
        # sensitivity, GPUs of its socket, local batch, and the tasks on its socket alone (only
        # the job's own: its workers are on distinct GPUs); per job (workers, PSs, theta3 w +
        # theta4 p, batch size, sync). Then, per worker, its GPU and socket (as rows of the same
        # float array: a solve concatenates the jobs' terms in fewer calls), and the sockets of the
        # job's tasks (workers, then PSs).
        gsock, sgpus, speeds = self._gpu_socket_l, self._socket_gpus_l, self._gpu_speed_l
        per_w: list[list[float]] = [[], [], [], [], [], [], [], []]
        a_w, th1_w, sens_w, sgpu_w, local_w, alone_w, gflat, sock = per_w
        tasks: list[int] = []
        job_l, wcut, tcut = [], [0], [0]
        for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist()):
            pr = self.profile(j)
            th = pr.theta
            gpus, ps = pl.gpus, pl.ps_sockets
            w, p = len(gpus), len(ps)
            sync = j.mode == "sync"
            th0, th1 = float(th[0]), float(th[1])
            sens = float(pr.compute_sensitivity) * self.interference_scale
            local = b / w if sync else float(b)
            speed = speeds.get(j.model) or self._gpu_speeds(j.model)
            socks = [gsock[g] for g in gpus]
            a_w += [th0 * local / speed[g] for g in gpus]
            th1_w += [th1] * w
            sens_w += [sens] * w
            sgpu_w += [sgpus[s] for s in socks]
            local_w += [local] * w
            if w <= 8:
                alone_w += [socks.count(s) + ps.count(s) for s in socks]
            else:  # a large job (a menu's 16 or 32 workers): its tasks counted per socket once
                on: dict[int, int] = {}
                for s in socks + list(ps):
                    on[s] = on.get(s, 0) + 1
                alone_w += [on[s] for s in socks]
            gflat += gpus
            sock += socks
            tasks += socks
            tasks += ps
            wcut.append(len(gflat))
            tcut.append(len(tasks))
            job_l.append((float(w), float(p), float(th[3]) * w + float(th[4]) * p, float(b), sync))
        pw = np.array(per_w, dtype=float).reshape(len(per_w), -1)  # (8, 0) where no worker at all
        t_a = np.array(tasks, dtype=np.int64)
        # every job's traffic rows at once: link ids over their seconds at full rate
        rows = self._traffic_rows(jobs, placements, batch)
        links = np.concatenate([r[0] for r in rows])
        lb = np.array((links, np.concatenate([r[1] for r in rows]) / self.capacity[links]))
        rcut = [0, *itertools.accumulate(r[0].size for r in rows)]
        return [_Terms(per_w=pw[:, wcut[i]:wcut[i + 1]], tasks=t_a[tcut[i]:tcut[i + 1]], job=job_l[i],
                       rows=lb[:, rcut[i]:rcut[i + 1]], size=(wcut[i + 1] - wcut[i], rcut[i + 1] - rcut[i]))
                for i in range(len(job_l))]

    def _gpu_speeds(self, model: str) -> list[float]:
        """Speed of ``model`` on each GPU (``Topology.type_speed``), as a Python list, kept per model."""
        v = self._gpu_speed_l.get(model)
        if v is None:
            t = self.topology
            v = self._gpu_speed_l[model] = t.type_speed(model)[t.gpu_type].tolist()
        return v

    def _solve(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray, isolated: bool,
               alone: Sequence[int] = ()) -> np.ndarray:
        """Speeds of ``jobs``: all together (they share GPUs, sockets and
        links), or each alone (``isolated``). The per-job terms come from
        ``_job_terms`` (cached per job, model, batch size and placement); what
        depends on the other jobs (time-sharing, socket pressure, link
        sharing) is solved here, vectorised over all jobs. ``alone``
        (together only): then also, after them, the speed of each job at
        these positions alone: a copy of its terms on a cluster of its own
        (its GPUs, sockets and links numbered past the others'), where it
        shares nothing, as in an isolated solve (its GPUs hold one worker
        each and its socket counts only its own tasks, exactly)."""
        terms = self._job_terms(jobs, placements, batch)
        if alone:
            t = self.topology
            G, S, L = t.n_gpus, t.n_sockets, self.capacity.size
            terms = terms + [terms[i].renumbered(k * G, k * S, k * L) for k, i in enumerate(alone, 1)]
        return self._solve_terms(terms, jobs, isolated)

    def speeds_apart(self, groups: Sequence[tuple[Sequence[Job], Sequence[Placement]]]) -> list[np.ndarray]:
        """``speeds`` of each group of jobs (at their own batch sizes), the
        groups apart: one solve of them all, each group on a copy of the
        cluster of its own (its GPUs, sockets and links numbered past the
        previous groups', as ``_solve``'s ``alone``), so that no group shares
        anything with another; the same numbers as one ``speeds`` call per
        group (every step of a solve is per element, per job, or a sum per
        GPU, socket or link in the order of its rows, which a copy keeps)."""
        if len(groups) < 2:
            return [self.speeds(j, p) for j, p in groups]
        self._bound_caches()
        t = self.topology
        G, S, L = t.n_gpus, t.n_sockets, self.capacity.size
        terms: list[_Terms] = []
        every: list[Job] = []
        for k, (jobs, pls) in enumerate(groups):
            own = self._job_terms(jobs, pls, np.array([j.batch_size for j in jobs], dtype=np.int64))
            terms += own if k == 0 else [x.renumbered(k * G, k * S, k * L) for x in own]
            every += jobs
        if not terms:
            return [np.zeros(0) for _ in groups]
        out = self._solve_terms(terms, every, isolated=False)
        cut = [0, *itertools.accumulate(len(j) for j, _ in groups)]
        return [out[cut[i]:cut[i + 1]] for i in range(len(groups))]

    def speeds_beside(self, others: tuple[Sequence[Job], Sequence[Placement]], job: Job,
                      placements: Sequence[Placement]) -> tuple[np.ndarray, list[np.ndarray]]:
        """``PerformanceModel.speeds_beside``: only the placements that share a GPU, a socket (a
        task of the job's on one of the others') or a link with the others are solved with
        them. At another, the others' speeds are theirs alone and the job's its own alone
        (``alone_speeds``), to the bit: every step of a solve is per element, per job, or a sum
        per GPU, socket or link in the order of its rows (as ``speeds_apart``'s copies), and the
        isolated solve is the one-job solve."""
        oj, op = others
        pls = list(placements)
        n = len(pls)
        self._bound_caches()
        own = self._job_terms([job] * n, pls, np.full(n, job.batch_size, dtype=np.int64))
        near = list(range(n))
        if oj:  # what the others hold
            gpus: set[float] = set()
            socks: set[int] = set()
            links: set[float] = set()
            for x in self._job_terms(oj, op, np.array([j.batch_size for j in oj], dtype=np.int64)):
                gpus.update(x.per_w[6].tolist())
                socks.update(x.tasks.tolist())
                links.update(x.rows[0].tolist())
            near = [i for i, x in enumerate(own) if not (gpus.isdisjoint(x.per_w[6].tolist())
                                                          and socks.isdisjoint(x.tasks.tolist())
                                                          and links.isdisjoint(x.rows[0].tolist()))]
        sps = self.speeds_apart([(oj, op), *(([*oj, job], [*op, pls[i]]) for i in near)])
        base = sps[0]
        out: list[np.ndarray] = [base] * n  # (each replaced below)
        for i, sp in zip(near, sps[1:]):
            out[i] = sp
        far = sorted(set(range(n)) - set(near))
        if far:
            alone = self.alone_speeds([job] * len(far), [pls[i] for i in far], np.full(len(far), job.batch_size))
            for i, v in zip(far, alone.tolist()):
                out[i] = np.append(base, v)
        return base, out

    def _solve_terms(self, terms: list[_Terms], jobs: Sequence[Job], isolated: bool) -> np.ndarray:
        """``_solve`` given the jobs' terms (``jobs``: for the refusal of an asynchronous all-reduce)."""
        t = self.topology
        n = len(terms)
        jt = np.array([x.job for x in terms])  # per job: workers, PSs, overheads, batch, sync
        over0, bsz = jt[:, 2], jt[:, 3]
        all_sync = all(x.job[4] for x in terms)  # Python: numpy's call costs more on a few jobs
        if not all_sync:
            refuse_async_allreduce(jobs, self.name)
        # Where each job's workers and traffic rows start in the flattened arrays (Python: a few jobs).
        starts, seg, n_rows = [], [], []
        nw = nr = 0
        for x in terms:
            starts.append(nw)
            seg.append(nr)
            nw += x.size[0]
            nr += x.size[1]
            n_rows.append(x.size[1])
        per_w = np.concatenate([x.per_w for x in terms], axis=1)
        a_w, th1, sens_w, sock_gpus, local_w = per_w[:5]

        # Per-worker compute: GPU type, time-sharing, socket pressure.
        if isolated:  # only the job's own tasks; its workers are on distinct GPUs
            on_sock = per_w[5]
            comp_a = a_w
        else:
            gflat, sock = per_w[6:].astype(np.intp)
            share = np.bincount(gflat, minlength=t.n_gpus)[gflat]
            on_sock = np.bincount(np.concatenate([x.tasks for x in terms]), minlength=t.n_sockets)[sock]
            comp_a = a_w * share
        if self.pressure_from != "tasks":  # an ablation of what presses (see PRESSURE_FROM)
            on_sock = self._pressing(per_w, [x.size[0] for x in terms], isolated)
        # Every other task on the socket presses on the worker's CPU, memory
        # bandwidth and input pipeline, the job's own other tasks included.
        pressure = (on_sock - 1) / sock_gpus
        c = 1.0 + sens_w * pressure
        # The fixed per-iteration work theta1 runs on the worker too, so the
        # socket pressure stretches it as well (Pollux single-server rows).
        comp_i = (comp_a + th1) * c
        comp_max = np.maximum.reduceat(comp_i, starts)
        # Synchronous jobs wait for their slowest worker each step (no wait: exactly over0 + 0).
        over = over0 + np.where(jt[:, 4] > 0, self.straggler * comp_max * (jt[:, 0] - 1), 0.0) \
            if self.straggler else over0

        # Traffic rows, then the fixed point of link sharing.
        rows = np.concatenate([x.rows for x in terms], axis=1)
        base = rows[1]  # seconds on the link at full rate
        links = None if isolated else rows[0].astype(np.intp)  # (alone, a link's load is the job's own)
        rjob = np.repeat(np.arange(n), n_rows)
        # A job's time on its bottleneck link: its rows are contiguous, so where every job has
        # rows a max per segment (reduceat) gives what max-at-index gives (all values >= 0).
        by_segment = all(n_rows)
        fixed = comp_max + over
        stretched = base  # base * rho; rho starts at 1
        for it in range(self.iterations + 1):
            if by_segment:
                comm = np.maximum.reduceat(stretched, seg)
            else:
                comm = np.zeros(n)
                np.maximum.at(comm, rjob, stretched)
            if it == self.iterations or not base.size:
                break  # the last pass only needs comm
            t_iter = fixed + comm
            # u: share of its iteration a job keeps each link busy at full rate.
            u = base / t_iter[rjob]
            # Rows are unique per (job, link): alone, a link's load is the job's own.
            U = u if links is None else np.bincount(links, weights=u, minlength=self.capacity.size)[links]
            # base * max(1 + contention (U - u), U), in place (the same operations)
            stretched = U - u
            stretched *= self.contention
            stretched += 1.0
            np.maximum(stretched, U, out=stretched)
            stretched *= base
        rest = over + comm
        speed_sync = bsz / (comp_max + rest)
        if all_sync:
            return speed_sync
        wjob = np.repeat(np.arange(n), [x.size[0] for x in terms])
        speed_async = np.bincount(wjob, weights=local_w / (comp_i + rest[wjob]), minlength=n)
        return np.where(jt[:, 4] > 0, speed_sync, speed_async)


@dataclass(eq=False, slots=True)
class _Routed:
    """Where one placement's traffic of given kinds goes: the sorted links its
    rows reach (``links``; a row is a link of a path, path by path) and each
    row's index among them (``inv``), each row's kind of path (``kind``: 0 a
    push or pull, 1 an input read, 2 a ring edge) and, with options that
    scale gradient bytes on the network, whether a row carries them over a
    network link (``on_net``; else None)."""

    links: np.ndarray
    inv: np.ndarray
    kind: np.ndarray
    on_net: np.ndarray | None


@dataclass(eq=False, slots=True)  # (slots: made by the thousand for a menu; not changed once made)
class _Terms:
    """What ``_solve`` needs of one job at one placement that no other job
    changes: per worker (``per_w``, rows) theta0 * local batch / GPU speed,
    theta1, compute sensitivity, GPUs of its socket, local batch, tasks of the
    job alone on its socket, its GPU and its socket (the last two whole
    numbers); the sockets of its tasks (workers, then PSs); per job (workers,
    PSs, theta3 w + theta4 p, batch size, sync); its traffic rows (``rows``:
    link ids, whole numbers, over their seconds at full rate); and its numbers
    of workers and of traffic rows (``size``)."""

    per_w: np.ndarray
    tasks: np.ndarray
    job: tuple[float, float, float, float, bool]
    rows: np.ndarray
    size: tuple[int, int]

    def renumbered(self, gpus: int, sockets: int, links: int) -> _Terms:
        """The same terms with its GPUs, sockets and links numbered from
        ``gpus``, ``sockets`` and ``links`` on (``_solve``'s ``alone``)."""
        per_w, rows = self.per_w.copy(), self.rows.copy()
        per_w[6] += gpus
        per_w[7] += sockets
        rows[0] += links
        return _Terms(per_w=per_w, tasks=self.tasks + sockets, job=self.job, rows=rows, size=self.size)
