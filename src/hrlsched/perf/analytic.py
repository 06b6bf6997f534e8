"""The topology-aware analytic performance model (the default backend).

Time per iteration of job j (design.md, "The analytic performance model"):

    t_j = max_i [theta0 * local_batch / g_i * k_i * c_i]   compute, slowest worker i (sync)
        + theta1 + theta3 * w + theta4 * p                   per-iteration overheads (Optimus)
        + max_l bytes_{j,l} * rho_l / C_l                     communication bottleneck

- g_i: relative speed of worker i's GPU type; k_i: workers time-sharing its
  GPU; c_i = 1 + s_j * pressure_i: compute interference, with s_j the
  model's sensitivity and pressure_i the other jobs' tasks on worker i's CPU
  socket per GPU of that socket (cache, memory bandwidth, input pipeline).
- Links l: each GPU's PCIe link to its switch, each switch's uplink to its
  socket, the QPI/UPI link of each server, each server's NIC, each rack's
  uplink, and each server's NVLink fabric where present. C_l: capacity.
- Traffic per iteration: a PS job's worker exchanges its gradient shard S/p
  with each PS (GPU -> switch -> socket, then QPI to a PS on the other
  socket, or NICs and rack uplinks to a PS on another server); an all-reduce
  job runs a ring over its workers (2 (w - 1) / w * S per ring edge, NVLink
  inside a server where present); every worker also loads its input
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
  by ``python -m hrlsched.perf.interference --write``: 1.52). u
  depends on speed, so t and rho are iterated to a fixed point
  (``iterations``, 3).
- S = theta2 x ``ref_gbps``: the bytes that cost theta2 seconds at the
  bandwidth at which theta2 was measured. With one PS job on a network whose
  links all have ``ref_gbps`` and its PSs on other servers, t reduces to the
  Optimus form theta0 M/w + theta1 + theta2 w/p + theta3 w + theta4 p
  (for w >= p; a test checks this).
- Async jobs: each worker runs at its own pace; the job's speed is the sum of
  its workers' local batch / t_i.

Per-job traffic (the (link, bytes) rows) is cached per placement
signature, and a call with the same jobs and placements as the last one
returns its result; otherwise the fixed point is re-solved for all jobs at
once, vectorised over all (job, link) rows. (Re-solving only the connected
groups of jobs whose neighbourhood changed was tried and measured slower:
7.8 ms against 2.9 ms for 500 jobs on 4,096 GPUs after one job moved, since
finding the groups costs more than one vectorised solve.)
Where it simplifies: full-duplex links carry one direction's bytes; compute
and communication do not overlap; pressure counts tasks, not their
intensity; the CPU home of a job's input pipeline is inferred, not placed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hrlsched.cluster.placement import Placement
from hrlsched.cluster.topology import Topology
from hrlsched.perf.base import PerformanceModel, gpu_share_counts
from hrlsched.workload.catalogue import ModelProfile
from hrlsched.workload.job import Job

GBPS = 1e9 / 8  # bytes per second in one Gbit/s


class AnalyticModel(PerformanceModel):
    name = "analytic"

    def __init__(
        self,
        topology: Topology,
        catalogue: Mapping[str, ModelProfile],
        ref_gbps: float = 25.0,
        iterations: int = 3,
        interference_scale: float = 1.0,
        contention: float | None = None,
    ) -> None:
        super().__init__(topology, catalogue)
        if ref_gbps <= 0:
            raise ValueError(f"perf.options.ref_gbps: expected > 0, got {ref_gbps}")
        if iterations < 1:
            raise ValueError(f"perf.options.iterations: expected >= 1, got {iterations}")
        self.ref_bytes_s = ref_gbps * GBPS
        self.iterations = int(iterations)
        self.interference_scale = float(interference_scale)
        if contention is None:  # fitted on DeepShare's sharing matrix (perf/interference.yaml)
            from hrlsched.perf.interference import load_params

            contention = load_params()["contention"]
        if contention < 0:
            raise ValueError(f"perf.options.contention: expected >= 0, got {contention}")
        self.contention = float(contention)
        t = topology
        G, S, V, R = t.n_gpus, t.n_switches, t.n_servers, t.n_racks
        self.off_switch, self.off_qpi, self.off_nic, self.off_rack, self.off_nvl = G, G + S, G + S + V, G + S + 2 * V, G + S + 2 * V + R
        nvl = t.nvlink_gbps * np.maximum(t.server_gpus, 1)  # aggregate NVLink fabric of a server
        cap = np.concatenate([t.pcie_gbps, t.switch_uplink_gbps, t.qpi_gbps, t.nic_gbps, t.rack_uplink_gbps, nvl])
        self.capacity = np.where(cap > 0, cap, np.inf) * GBPS
        self.socket_gpus = np.bincount(t.gpu_socket, minlength=t.n_sockets).astype(float)
        self._rows: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._last: tuple | None = None

    # ------------------------------------------------------------ traffic
    def _path(self, a: int, b_socket: int, b_gpu: int | None) -> list[int]:
        """Links from GPU a to socket b_socket (a PS, host memory) or to GPU b_gpu."""
        t = self.topology
        sa = int(t.gpu_socket[a])
        links = [a]
        if b_gpu is not None:
            va, vb = int(t.gpu_server[a]), int(t.gpu_server[b_gpu])
            if va == vb and t.nvlink_gbps[va] > 0:
                return [self.off_nvl + va]
            links.append(b_gpu)
            if t.gpu_switch[a] == t.gpu_switch[b_gpu]:
                return links
            links += [self.off_switch + int(t.gpu_switch[a]), self.off_switch + int(t.gpu_switch[b_gpu])]
            b_socket = int(t.gpu_socket[b_gpu])
        else:
            links.append(self.off_switch + int(t.gpu_switch[a]))
        if sa == b_socket:
            return links
        va, vb = int(t.socket_server[sa]), int(t.socket_server[b_socket])
        if va == vb:
            return links + [self.off_qpi + va]
        links += [self.off_nic + va, self.off_nic + vb]
        ra, rb = int(t.server_rack[va]), int(t.server_rack[vb])
        if ra != rb:
            links += [self.off_rack + ra, self.off_rack + rb]
        return links

    def traffic(self, job: Job, pl: Placement, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(link ids, bytes per iteration) of one job at one placement."""
        key = (job.model, job.arch, job.mode, batch, pl)
        hit = self._rows.get(key)
        if hit is not None:
            return hit
        t, prof = self.topology, self.profile(job)
        w = pl.n_workers
        local = batch / w if job.mode == "sync" else float(batch)
        S = prof.theta[2] * self.ref_bytes_s
        acc: dict[int, float] = {}

        def add(links: list[int], nbytes: float) -> None:
            for link in links:
                acc[link] = acc.get(link, 0.0) + nbytes

        gpus = sorted(pl.gpus)
        if job.arch == "ps" and pl.n_ps:
            shard = S / pl.n_ps
            for g in gpus:
                for k in pl.ps_sockets:
                    add(self._path(g, int(k), None), shard)
        elif job.arch == "allreduce" and w > 1:
            edge = 2.0 * (w - 1) / w * S
            for a, b in zip(gpus, gpus[1:] + gpus[:1]):
                add(self._path(a, -1, b), edge)
        # Input pipeline: host memory of the job's CPU home socket on each server.
        socks = [int(t.gpu_socket[g]) for g in gpus] + [int(s) for s in pl.ps_sockets]
        home: dict[int, int] = {}
        for v in {int(t.socket_server[s]) for s in socks}:
            here = [s for s in socks if t.socket_server[s] == v]
            home[v] = max(sorted(set(here)), key=here.count)
        inp = local * prof.input_mb_per_sample * 1e6
        if inp > 0:
            for g in gpus:
                add(self._path(g, home[int(t.gpu_server[g])], None), inp)
        links = np.fromiter(acc.keys(), dtype=np.int64, count=len(acc))
        nbytes = np.fromiter(acc.values(), dtype=float, count=len(acc))
        out = self._rows[key] = (links, nbytes)
        return out

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
        t = self.topology
        batch = np.array([j.batch_size for j in jobs], dtype=np.int64) if batch_sizes is None else np.asarray(batch_sizes, dtype=np.int64)
        sig = (tuple(j.job_id for j in jobs), tuple(placements), batch.tobytes())
        if self._last is not None and self._last[0] == sig:
            return self._last[1].copy()
        profs = [self.profile(j) for j in jobs]
        theta = np.array([p.theta for p in profs], dtype=float)
        sens = np.array([p.compute_sensitivity for p in profs]) * self.interference_scale
        sync = np.array([j.mode == "sync" for j in jobs])
        w = np.fromiter((p.n_workers for p in placements), dtype=np.int64, count=n)
        ps = np.fromiter((p.n_ps for p in placements), dtype=np.int64, count=n)
        local = np.where(sync, batch / w, batch).astype(float)

        # Per-worker compute: GPU type, time-sharing, socket pressure.
        gflat = np.fromiter((g for p in placements for g in p.gpus), dtype=np.int64, count=int(w.sum()))
        wjob = np.repeat(np.arange(n), w)
        sflat = np.fromiter((s for p in placements for s in p.ps_sockets), dtype=np.int64, count=int(ps.sum()))
        pjob = np.repeat(np.arange(n), ps)
        share = gpu_share_counts(placements, t.n_gpus)[gflat]
        tasks_sock = np.bincount(t.gpu_socket[gflat], minlength=t.n_sockets) + np.bincount(sflat, minlength=t.n_sockets)
        key = np.concatenate([wjob * t.n_sockets + t.gpu_socket[gflat], pjob * t.n_sockets + sflat])
        uniq, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
        own = cnt[inv[: gflat.size]]
        sock = t.gpu_socket[gflat]
        pressure = (tasks_sock[sock] - own) / self.socket_gpus[sock]
        c = 1.0 + sens[wjob] * pressure
        comp_i = theta[wjob, 0] * local[wjob] / t.gpu_speed[gflat] * share * c
        starts = np.concatenate([[0], np.cumsum(w)[:-1]])
        comp_max = np.maximum.reduceat(comp_i, starts)
        over = theta[:, 1] + theta[:, 3] * w + theta[:, 4] * ps

        # Traffic rows, then the fixed point of link sharing.
        rows = [self.traffic(j, p, int(b)) for j, p, b in zip(jobs, placements, batch)]
        lens = np.fromiter((r[0].size for r in rows), dtype=np.int64, count=n)
        links = np.concatenate([r[0] for r in rows]) if lens.sum() else np.zeros(0, dtype=np.int64)
        nbytes = np.concatenate([r[1] for r in rows]) if lens.sum() else np.zeros(0)
        rjob = np.repeat(np.arange(n), lens)
        base = nbytes / self.capacity[links]  # seconds on the link at full rate
        comm = np.zeros(n)
        rho = np.ones(links.size)
        for _ in range(self.iterations + 1):
            comm = np.zeros(n)
            if links.size:
                np.maximum.at(comm, rjob, base * rho)
            t_iter = comp_max + over + comm
            if not links.size:
                break
            # u: share of its iteration a job keeps each link busy at full rate.
            u = base / t_iter[rjob]
            U = np.bincount(links, weights=u, minlength=self.capacity.size)[links]
            rho = np.maximum(1.0 + self.contention * (U - u), U)
        rest = over + comm
        speed_sync = batch / (comp_max + rest)
        speed_async = np.bincount(wjob, weights=local[wjob] / (comp_i + rest[wjob]), minlength=n)
        out = np.where(sync, speed_sync, speed_async)
        self._last = (sig, out.copy())
        return out
