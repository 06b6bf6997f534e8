"""The cluster as index arrays: gpu -> switch -> socket -> server -> rack.

Everything downstream (occupancy, link loads, placement scores) is computed
with numpy over these arrays, never with a Python loop over GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hrlsched.cluster.spec import GPU_SPEED, ClusterSpec


@dataclass(frozen=True, eq=False)
class Topology:
    spec: ClusterSpec
    gpu_switch: np.ndarray
    switch_socket: np.ndarray
    socket_server: np.ndarray
    server_rack: np.ndarray
    server_group: np.ndarray
    gpu_type: np.ndarray  # index into gpu_type_names
    gpu_type_names: tuple[str, ...]
    gpu_speed: np.ndarray  # the type's ratio of each GPU (same for every model; backends read type_speed)
    socket_cores: np.ndarray
    server_cores: np.ndarray
    server_mem_gb: np.ndarray
    pcie_gbps: np.ndarray  # per GPU
    switch_uplink_gbps: np.ndarray  # per switch
    qpi_gbps: np.ndarray  # per server
    nic_gbps: np.ndarray  # per server
    nvlink_gbps: np.ndarray  # per server, 0 where absent
    rack_uplink_gbps: np.ndarray  # per rack
    # derived
    gpu_socket: np.ndarray = field(init=False)
    gpu_server: np.ndarray = field(init=False)
    gpu_rack: np.ndarray = field(init=False)
    switch_server: np.ndarray = field(init=False)
    server_gpus: np.ndarray = field(init=False)  # GPU count per server
    server_first_gpu: np.ndarray = field(init=False)
    # model -> its speed on each GPU type (cluster.gpu_speed.model_speed), filled on demand
    _type_speed: tuple[dict[str, int], np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gs = self.switch_socket[self.gpu_switch]
        object.__setattr__(self, "gpu_socket", gs)
        object.__setattr__(self, "gpu_server", self.socket_server[gs])
        object.__setattr__(self, "gpu_rack", self.server_rack[self.gpu_server])
        object.__setattr__(self, "switch_server", self.socket_server[self.switch_socket])
        counts = np.bincount(self.gpu_server, minlength=self.n_servers)
        object.__setattr__(self, "server_gpus", counts)
        object.__setattr__(self, "server_first_gpu", np.concatenate([[0], np.cumsum(counts)[:-1]]))
        object.__setattr__(self, "_type_speed", ({}, np.zeros((0, len(self.gpu_type_names)))))
        for name in ("gpu_switch", "switch_socket", "socket_server", "server_rack", "gpu_socket", "gpu_server"):
            getattr(self, name).setflags(write=False)

    @property
    def n_gpus(self) -> int:
        return len(self.gpu_switch)

    @property
    def n_switches(self) -> int:
        return len(self.switch_socket)

    @property
    def n_sockets(self) -> int:
        return len(self.socket_server)

    @property
    def n_servers(self) -> int:
        return len(self.server_rack)

    @property
    def n_racks(self) -> int:
        return int(self.server_rack.max()) + 1

    def type_speed(self, model: str) -> np.ndarray:
        """Speed of ``model`` on each GPU type of the cluster (index as
        ``gpu_type``), relative to a V100: ``cluster.gpu_speed.model_speed``,
        the one source the performance backends read. ``gpu_speed`` is the
        per-type ratio alone, the same for every model."""
        k = self._speed_row(model)
        return self._type_speed[1][k]

    def _speed_row(self, model: str) -> int:
        index, table = self._type_speed
        k = index.get(model)
        if k is None:
            from hrlsched.cluster.gpu_speed import model_speed

            row = [model_speed(model, t, self.spec.gpu_speed) for t in self.gpu_type_names]
            table = np.vstack([table, row])
            table.setflags(write=False)
            k = index[model] = len(index)
            object.__setattr__(self, "_type_speed", (index, table))
        return k

    def type_speeds(self, models: Sequence[str]) -> np.ndarray:
        """(len(models), GPU types): ``type_speed`` of each model."""
        index = self._type_speed[0]
        try:
            rows = [index[m] for m in models]
        except KeyError:
            rows = [self._speed_row(m) for m in models]
        return self._type_speed[1][rows]  # read after _speed_row grew it

    def model_gpu_speed(self, model: str) -> np.ndarray:
        """Speed of ``model`` on each GPU."""
        return self.type_speed(model)[self.gpu_type]

    def server_sockets(self, server: int) -> np.ndarray:
        return np.flatnonzero(self.socket_server == server)

    @classmethod
    def from_spec(cls, spec: ClusterSpec) -> Topology:
        speeds = {**GPU_SPEED, **spec.gpu_speed}
        type_names = tuple(sorted({g.gpu_type for g in spec.server_groups}))
        gpu_switch, switch_socket, socket_server = [], [], []
        server_group, gpu_type, socket_cores, server_cores, server_mem = [], [], [], [], []
        pcie, uplink, qpi, nic, nvlink = [], [], [], [], []
        server = socket = switch = 0
        for gi, g in enumerate(spec.server_groups):
            for _ in range(g.count):
                for _s in range(g.sockets):
                    for _w in range(g.switches_per_socket):
                        gpu_switch += [switch] * g.gpus_per_switch
                        gpu_type += [type_names.index(g.gpu_type)] * g.gpus_per_switch
                        pcie += [g.pcie_gbps] * g.gpus_per_switch
                        switch_socket.append(socket)
                        uplink.append(g.switch_uplink_gbps)
                        switch += 1
                    socket_server.append(server)
                    socket_cores.append(g.cores_per_socket)
                    socket += 1
                server_group.append(gi)
                server_cores.append(g.cores_per_socket * g.sockets)
                server_mem.append(g.memory_gb)
                qpi.append(g.qpi_gbps)
                nic.append(g.nic_gbps)
                nvlink.append(g.nvlink_gbps)
                server += 1
        n_servers = server
        # Racks hold contiguous, nearly equal blocks of servers.
        server_rack = (np.arange(n_servers) * spec.racks) // n_servers
        nic_a = np.asarray(nic, dtype=float)
        rack_nic = np.bincount(server_rack, weights=nic_a, minlength=spec.racks)
        type_speed = np.array([speeds[t] for t in type_names])
        gpu_type_a = np.asarray(gpu_type, dtype=np.int64)
        return cls(
            spec=spec,
            gpu_switch=np.asarray(gpu_switch, dtype=np.int64),
            switch_socket=np.asarray(switch_socket, dtype=np.int64),
            socket_server=np.asarray(socket_server, dtype=np.int64),
            server_rack=server_rack.astype(np.int64),
            server_group=np.asarray(server_group, dtype=np.int64),
            gpu_type=gpu_type_a,
            gpu_type_names=type_names,
            gpu_speed=type_speed[gpu_type_a],
            socket_cores=np.asarray(socket_cores, dtype=float),
            server_cores=np.asarray(server_cores, dtype=float),
            server_mem_gb=np.asarray(server_mem, dtype=float),
            pcie_gbps=np.asarray(pcie, dtype=float),
            switch_uplink_gbps=np.asarray(uplink, dtype=float),
            qpi_gbps=np.asarray(qpi, dtype=float),
            nic_gbps=nic_a,
            nvlink_gbps=np.asarray(nvlink, dtype=float),
            rack_uplink_gbps=rack_nic / spec.rack_uplink_oversubscription,
        )
