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
  Pollux single-server measurements (``calibration.colocation``).
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
signature; the rows of all placements not yet seen are built in one pass
over flattened (job, worker, PS) and ring-edge arrays, routed with masks
and summed per (job, link) with ``np.unique`` / ``np.bincount`` (no loop
over GPUs or links). A call with the same jobs and placements as the last one
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
# Paths (GPUs x (GPUs + sockets)) up to which the routes are tabulated per topology (at most
# about 20 MB; 64 GPUs and 16 sockets: 5,120), and (job, link) keys up to which traffic is
# summed with a dense bincount rather than np.unique.
_ROUTE_TABLE_MAX = 1 << 18
_DENSE_KEYS_MAX = 1 << 16


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
        for name, v, lo in (("ring_spread_eff", ring_spread_eff, 1e-9), ("host_staging", host_staging, 0.0), ("straggler", straggler, 0.0)):
            if not v >= lo:
                raise ValueError(f"perf.options.{name}: expected {'> 0' if lo else '>= 0'}, got {v}")
        self.ring_spread_eff, self.host_staging, self.straggler = float(ring_spread_eff), float(host_staging), float(straggler)
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
        self._route_table: np.ndarray | None = None  # see _paths
        self._terms: dict[tuple, _Terms] = {}  # per (model, arch, mode, batch, placement): see _job_terms
        self._last: tuple | None = None

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

    def _paths(self, a: np.ndarray, dst_socket: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_route``'s rows, read from a table of every path of the topology
        (GPU to GPU, GPU to socket; routed once, on first use) where that table
        is small: one lookup instead of some thirty numpy calls per build."""
        t = self.topology
        G, m = t.n_gpus, t.n_gpus + t.n_sockets
        if G * m > _ROUTE_TABLE_MAX:
            return self._route(a, dst_socket, b)
        tab = self._route_table
        if tab is None:
            col = np.tile(np.arange(m), G)
            path, link = self._route(np.repeat(np.arange(G), m), np.maximum(col - G, 0), np.where(col < G, col, -1))
            cnt = np.bincount(path, minlength=G * m)
            tab = np.full((G * m, int(cnt.max())), -1, dtype=np.int64)  # a path's links in _route's order, -1 after
            tab[path, np.arange(path.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)] = link
            self._route_table = tab
        rows = tab[a * m + np.where(b >= 0, b, G + dst_socket)]
        path, kind = (rows >= 0).nonzero()  # path by path
        return path, rows[path, kind]

    def _build_traffic(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(link ids, bytes per iteration) of each job, built for all of them at
        once over flattened (job, GPU) / (job, GPU, PS) / (job, ring edge)
        arrays; no loop over GPUs or links."""
        t = self.topology
        n = len(jobs)
        # Per job, as Python numbers in one pass (the jobs are those first seen, few; numpy
        # calls on arrays of one or two entries cost more): workers, PSs, PS shard bytes
        # and ring edge bytes (with whether the job has such traffic), input bytes per worker, S and
        # the bytes on a path (S, or the real gradient size inside a server: scaled to S below).
        w_l, p_l, ps_l, shard_l, ring_l, edge_l, inp_l, S_l, grad_l = [], [], [], [], [], [], [], [], []
        for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist()):
            pr = self.profile(j)
            w, p = len(pl.gpus), len(pl.ps_sockets)
            S = pr.theta[2] * self.ref_bytes_s
            P = pr.params_mb * 1e6
            grad = (P if P > 0 else S) if self.intra_params else S
            local = b / w if j.mode == "sync" else float(b)
            w_l.append(w)
            p_l.append(p)
            ps_l.append(j.arch == "ps" and p > 0)
            shard_l.append(grad / max(p, 1))
            ring_l.append(j.arch == "allreduce" and w > 1)
            edge_l.append(2.0 * (w - 1) / max(w, 1) * grad)
            inp_l.append(local * pr.input_mb_per_sample * 1e6)
            S_l.append(S)
            grad_l.append(grad)
        w, p = np.array(w_l), np.array(p_l)
        is_ps, is_ring = np.array(ps_l), np.array(ring_l)
        inp = np.array(inp_l)
        # Workers sorted within each job (the ring's order), PS sockets flat.
        g = np.fromiter((x for pl in placements for x in pl.gpus), dtype=np.int64, count=sum(w_l))
        gjob = np.repeat(np.arange(n), w)
        g = g[np.lexsort((g, gjob))]
        s = np.fromiter((x for pl in placements for x in pl.ps_sockets), dtype=np.int64, count=sum(p_l))
        sjob = np.repeat(np.arange(n), p)

        # (The pairs of a kind no job has are empty: skipped, a build has a job or two.)
        none_i, none_f = np.zeros(0, dtype=np.int64), np.zeros(0)
        # PS: every worker exchanges its shard S/p with every PS.
        ps_pairs = (none_i, none_i, none_i, none_f)
        if any(ps_l):
            wp = np.where(is_ps[gjob], p[gjob], 0)
            wi = np.repeat(np.arange(g.size), wp)
            k = np.arange(wi.size) - np.repeat(wp.cumsum() - wp, wp)  # PS index within the job
            jj = gjob[wi]
            sstart = p.cumsum() - p
            ps_pairs = (g[wi], s[sstart[jj] + k], jj, np.array(shard_l)[jj])
        # Ring: each worker sends 2 (w - 1) / w S to the next (cyclic, sorted order).
        ring = (none_i, none_i, none_i, none_f)
        if any(ring_l):
            rw = is_ring[gjob]
            nxt = np.arange(1, g.size + 1)
            gstart = w.cumsum() - w
            last = nxt == gstart[gjob] + w[gjob]
            nxt[last] = gstart[gjob][last]
            ring = (g[rw], g[nxt][rw], gjob[rw], np.array(edge_l)[gjob][rw])
        # Input pipeline: from the job's CPU home on each server (the socket
        # with most of its tasks there; the lowest on a tie) to each worker.
        NS = t.n_sockets
        cnt = np.bincount(np.concatenate([gjob * NS + t.gpu_socket[g], sjob * NS + s]))  # tasks per (job, socket)
        u = cnt.nonzero()[0]
        cnt = cnt[u]
        ujob, usock = u // NS, u % NS
        srv_key = ujob * t.n_servers + t.socket_server[usock]
        pick = np.lexsort((usock, -cnt, srv_key))
        sk = srv_key[pick]
        first = np.empty(sk.size, dtype=bool)
        first[0] = True
        np.not_equal(sk[1:], sk[:-1], out=first[1:])
        hkeys, hsock = sk[first], usock[pick][first]
        iw = inp[gjob] > 0
        home = hsock[np.searchsorted(hkeys, gjob * t.n_servers + t.gpu_server[g])]

        D = self.n_links
        n_ps, n_in, n_ring = ps_pairs[0].size, int(np.count_nonzero(iw)), ring[0].size
        # The paths of the push (worker -> PS), of the input (host -> worker, routed from the
        # worker) and of the ring, routed at once; their rows come path by path.
        pi_a, link_a = self._paths(np.concatenate([ps_pairs[0], g[iw], ring[0]]),
                                   np.concatenate([ps_pairs[1], home[iw], np.zeros(n_ring, dtype=np.int64)]),
                                   np.concatenate([np.full(n_ps + n_in, -1), ring[1]]))
        m = int(np.searchsorted(pi_a, n_ps))
        pi_p, link_p, pi_o, link_o = pi_a[:m], link_a[:m], pi_a[m:], link_a[m:]
        # Pull (PS -> worker) and input (host -> GPU) run the other way.
        pi = np.concatenate([pi_p, pi_p + n_ps, pi_o + n_ps])
        link = np.concatenate([link_p, (link_p + D) % (2 * D),
                               np.where(pi_o < n_ps + n_in, (link_o + D) % (2 * D), link_o)])
        nbytes = np.concatenate([ps_pairs[3], ps_pairs[3], inp[gjob][iw], ring[3]])
        pjob = np.concatenate([ps_pairs[2], ps_pairs[2], gjob[iw], ring[2]])
        # Gradient traffic on network links (NIC, rack uplink): theta2-sized
        # bytes (S / grad) and, for rings, the measured spread efficiency and
        # host staging (servers spanned, most workers on one server). With
        # the neutral options every factor is exactly 1: skipped (the default).
        if self.intra_params or self.ring_spread_eff != 1.0 or self.host_staging != 0.0:
            S, grad = np.array(S_l), np.array(grad_l)
            js, js_cnt = np.unique(gjob * t.n_servers + t.gpu_server[g], return_counts=True)
            n_srv = np.bincount(js // t.n_servers, minlength=n)
            g_most = np.zeros(n, dtype=np.int64)
            np.maximum.at(g_most, js // t.n_servers, js_cnt)
            ring_f = np.where(n_srv > 2, self.ring_spread_eff, 1.0) * (1.0 + self.host_staging * (g_most - 1))
            net_scale = np.divide(S, grad, out=np.ones(n), where=grad > 0) * np.where(is_ring, ring_f, 1.0)
            grad_row = np.repeat([True, False, True], [2 * n_ps, n_in, n_ring])
            phys = link % D
            on_net = grad_row[pi] & (phys >= self.off_nic) & (phys < self.off_nvl)
            row_bytes = nbytes[pi] * np.where(on_net, net_scale[pjob[pi]], 1.0)
        else:
            row_bytes = nbytes[pi]
        # Sum bytes per (job, directed link), then split the rows by job. bincount adds each
        # key's rows in row order, as np.unique's inverse would; dense where the keys are few.
        L = self.capacity.size
        key = pjob[pi] * L + link
        if n * L <= _DENSE_KEYS_MAX:
            keys = np.bincount(key).nonzero()[0]
            tot = np.bincount(key, weights=row_bytes)[keys]
        else:
            keys, inv = np.unique(key, return_inverse=True)
            tot = np.bincount(inv, weights=row_bytes, minlength=keys.size)
        cut = np.searchsorted(keys // L, np.arange(n + 1)).tolist()
        links = keys % L
        return [(links[cut[i]:cut[i + 1]], tot[cut[i]:cut[i + 1]]) for i in range(n)]

    def _traffic_rows(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Traffic of each job, from the cache or built (vectorised) for the missing ones."""
        keys = [(j.model, j.arch, j.mode, int(b), pl) for j, pl, b in zip(jobs, placements, batch)]
        miss = [i for i, k in enumerate(keys) if k not in self._rows]
        if miss:
            built = self._build_traffic([jobs[i] for i in miss], [placements[i] for i in miss],
                                        np.asarray(batch)[miss])
            for i, r in zip(miss, built):
                self._rows[keys[i]] = r
        return [self._rows[k] for k in keys]

    def traffic(self, job: Job, pl: Placement, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(link ids, bytes per iteration) of one job at one placement."""
        return self._traffic_rows([job], [pl], np.array([batch]))[0]

    def traffic_many(self, jobs: Sequence[Job], placements: Sequence[Placement],
                     batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``traffic`` of many jobs at once."""
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
        sig = (tuple(j.job_id for j in jobs), tuple(placements), batch.tobytes())
        if self._last is not None and self._last[0] == sig:
            return self._last[1].copy()
        out = self._solve(jobs, placements, batch, isolated=False)
        self._last = (sig, out.copy())
        return out

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
        batch = np.array([j.batch_size for j in jobs], dtype=np.int64) if batch_sizes is None else np.asarray(batch_sizes, dtype=np.int64)
        return self._solve(jobs, placements, batch, isolated=True)

    def _job_terms(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[_Terms]:
        """The terms of ``_solve`` that depend only on each job (model, mode,
        batch size, placement), from the cache or built (vectorised) for the
        missing ones: the same expressions as a whole solve, split by job."""
        keys = [(j.model, j.arch, j.mode, b, pl) for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist())]
        cache = self._terms
        miss = [i for i, k in enumerate(keys) if k not in cache]
        if miss:
            mj, mp = [jobs[i] for i in miss], [placements[i] for i in miss]
            for k, terms in zip((keys[i] for i in miss), self._build_terms(mj, mp, np.asarray(batch, dtype=np.int64)[miss])):
                cache[k] = terms
        return [cache[k] for k in keys]

    def _build_terms(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray) -> list[_Terms]:
        n = len(jobs)
        t = self.topology
        # Per job, as Python numbers in one pass (few jobs: see _build_traffic): theta0, theta1,
        # sensitivity, local batch, and (workers, PSs, theta3 w + theta4 p, batch size, sync).
        th0_l, th1_l, sens_l, local_l, job_l = [], [], [], [], []
        for j, pl, b in zip(jobs, placements, np.asarray(batch).tolist()):
            pr = self.profile(j)
            th = pr.theta
            w, p = len(pl.gpus), len(pl.ps_sockets)
            sync = j.mode == "sync"
            th0_l.append(float(th[0]))
            th1_l.append(float(th[1]))
            sens_l.append(float(pr.compute_sensitivity) * self.interference_scale)
            local_l.append(b / w if sync else float(b))
            job_l.append((float(w), float(p), float(th[3]) * w + float(th[4]) * p, float(b), sync))
        wcut = [0, *itertools.accumulate(len(pl.gpus) for pl in placements)]
        scut = [0, *itertools.accumulate(len(pl.ps_sockets) for pl in placements)]
        gflat = np.fromiter((g for p in placements for g in p.gpus), dtype=np.int64, count=wcut[-1])
        wjob = np.repeat(np.arange(n), np.diff(wcut))
        sflat = np.fromiter((s for p in placements for s in p.ps_sockets), dtype=np.int64, count=scut[-1])
        sock = t.gpu_socket[gflat]
        # Alone, the tasks on a worker's socket are the job's own (its workers are on distinct GPUs).
        keys = wjob * t.n_sockets + sock
        on_sock_alone = np.bincount(np.concatenate([keys, np.repeat(np.arange(n), np.diff(scut)) * t.n_sockets + sflat]),
                                    minlength=n * t.n_sockets)[keys]
        gspeed = t.type_speeds([j.model for j in jobs])[wjob, t.gpu_type[gflat]]  # per (model, GPU type)
        # Per worker: theta0 * local batch / GPU speed (times the time-sharing in a solve), theta1,
        # sensitivity, GPUs of its socket, local batch; as rows, to concatenate jobs in one call.
        per_w = np.empty((6, gflat.size))
        lw = per_w[4]
        np.take(local_l, wjob, out=lw)
        per_w[0] = np.take(th0_l, wjob) * lw / gspeed
        per_w[1] = np.take(th1_l, wjob)
        per_w[2] = np.take(sens_l, wjob)
        per_w[3] = self.socket_gpus[sock]
        per_w[5] = on_sock_alone
        rows = self._traffic_rows(jobs, placements, batch)
        out = []
        for i, (links, nbytes) in enumerate(rows):
            a, b = wcut[i], wcut[i + 1]
            out.append(_Terms(
                gpus=gflat[a:b], sock=sock[a:b], ps_sockets=sflat[scut[i]:scut[i + 1]], per_w=per_w[:, a:b],
                job=job_l[i], links=links, base=nbytes / self.capacity[links],
            ))
        return out

    def _solve(self, jobs: Sequence[Job], placements: Sequence[Placement], batch: np.ndarray, isolated: bool) -> np.ndarray:
        """Speeds of ``jobs``: all together (they share GPUs, sockets and
        links), or each alone (``isolated``). The per-job terms come from
        ``_job_terms`` (cached per job, model, batch size and placement); what
        depends on the other jobs (time-sharing, socket pressure, link
        sharing) is solved here, vectorised over all jobs."""
        n = len(jobs)
        t = self.topology
        terms = self._job_terms(jobs, placements, batch)
        jt = np.array([x.job for x in terms])  # per job: workers, PSs, overheads, batch, sync
        w, over0, bsz = jt[:, 0], jt[:, 2], jt[:, 3]
        sync = jt[:, 4] > 0
        all_sync = all(x.job[4] for x in terms)  # Python: numpy's call costs more on a few jobs
        if not all_sync:
            refuse_async_allreduce(jobs, self.name)
        wi = w.astype(np.int64)
        per_w = np.concatenate([x.per_w for x in terms], axis=1)
        a_w, th1, sens_w, sock_gpus, local_w = per_w[0], per_w[1], per_w[2], per_w[3], per_w[4]

        # Per-worker compute: GPU type, time-sharing, socket pressure.
        if isolated:  # only the job's own tasks; its workers are on distinct GPUs
            on_sock = per_w[5]
            comp_a = a_w
        else:
            gflat = np.concatenate([x.gpus for x in terms])
            sock = np.concatenate([x.sock for x in terms])
            sflat = np.concatenate([x.ps_sockets for x in terms])
            share = np.bincount(gflat, minlength=t.n_gpus)[gflat]
            tasks_sock = np.bincount(sock, minlength=t.n_sockets) + np.bincount(sflat, minlength=t.n_sockets)
            on_sock = tasks_sock[sock]
            comp_a = a_w * share
        # Every other task on the socket presses on the worker's CPU, memory
        # bandwidth and input pipeline, the job's own other tasks included.
        pressure = (on_sock - 1) / sock_gpus
        c = 1.0 + sens_w * pressure
        # The fixed per-iteration work theta1 runs on the worker too, so the
        # socket pressure stretches it as well (Pollux single-server rows).
        comp_i = (comp_a + th1) * c
        starts = wi.cumsum() - wi
        comp_max = np.maximum.reduceat(comp_i, starts)
        # Synchronous jobs wait for their slowest worker each step (no wait: exactly over0 + 0).
        over = over0 + np.where(sync, self.straggler * comp_max * (w - 1), 0.0) if self.straggler else over0

        # Traffic rows, then the fixed point of link sharing.
        lens_l = [x.links.size for x in terms]
        lens = np.array(lens_l)
        links = np.concatenate([x.links for x in terms])
        base = np.concatenate([x.base for x in terms])  # seconds on the link at full rate
        rjob = np.repeat(np.arange(n), lens)
        # A job's time on its bottleneck link: its rows are contiguous, so where every job has
        # rows a max per segment (reduceat) gives what max-at-index gives (all values >= 0).
        by_segment = all(lens_l)
        seg = lens.cumsum() - lens
        fixed = comp_max + over
        stretched = base  # base * rho; rho starts at 1
        for it in range(self.iterations + 1):
            if by_segment:
                comm = np.maximum.reduceat(stretched, seg)
            else:
                comm = np.zeros(n)
                np.maximum.at(comm, rjob, stretched)
            if it == self.iterations or not links.size:
                break  # the last pass only needs comm
            t_iter = fixed + comm
            # u: share of its iteration a job keeps each link busy at full rate.
            u = base / t_iter[rjob]
            # Rows are unique per (job, link): alone, a link's load is the job's own.
            U = u if isolated else np.bincount(links, weights=u, minlength=self.capacity.size)[links]
            stretched = base * np.maximum(1.0 + self.contention * (U - u), U)
        rest = over + comm
        speed_sync = bsz / (comp_max + rest)
        if all_sync:
            return speed_sync
        wjob = np.repeat(np.arange(n), wi)
        speed_async = np.bincount(wjob, weights=local_w / (comp_i + rest[wjob]), minlength=n)
        return np.where(sync, speed_sync, speed_async)


@dataclass(frozen=True, eq=False)
class _Terms:
    """What ``_solve`` needs of one job at one placement that no other job
    changes: its GPUs, their sockets and its PS sockets; per worker (rows)
    theta0 * local batch / GPU speed, theta1, compute sensitivity, GPUs of
    its socket, local batch and tasks of the job alone on its socket; per job
    (workers, PSs, theta3 w + theta4 p, batch size, sync); its traffic rows
    (link ids) with their seconds at full rate."""

    gpus: np.ndarray
    sock: np.ndarray
    ps_sockets: np.ndarray
    per_w: np.ndarray
    job: tuple[float, float, float, float, bool]
    links: np.ndarray
    base: np.ndarray

