"""Cluster specification (YAML in, YAML out), validated field by field.

Bandwidths are in Gbit/s, memory in GiB. A cluster is a list of server groups
(heterogeneous clusters have several), spread over racks in order.
"""

from __future__ import annotations

from hrlsched.schema import Settings, setting

# Relative per-GPU training throughput against a V100 (1.0). Ratios of the
# isolated single-GPU throughputs in Gavel's measurements (ResNet-50, K80 /
# P100 / V100) and vendor figures for the rest; a spec may override them.
GPU_SPEED: dict[str, float] = {
    "K80": 0.22,
    "P100": 0.60,
    "T4": 0.45,
    "V100": 1.00,
    "A10": 0.70,
    "A100": 1.80,
    "H100": 3.00,
}


class ServerGroupSpec(Settings):
    """``count`` identical servers."""

    name: str = "default"
    count: int = setting(gt=0)
    sockets: int = setting(2, gt=0, description="CPU sockets per server")
    switches_per_socket: int = setting(2, gt=0, description="PCIe switches under each socket")
    gpus_per_switch: int = setting(2, gt=0)
    gpu_type: str = "V100"
    cores_per_socket: int = setting(16, gt=0)
    memory_gb: float = setting(256.0, gt=0, description="host memory per server")
    nic_gbps: float = setting(25.0, gt=0)
    qpi_gbps: float = setting(64.0, gt=0, description="QPI/UPI link between sockets (effective, for GPU traffic)")
    pcie_gbps: float = setting(128.0, gt=0, description="GPU-to-switch link (PCIe 3.0 x16)")
    switch_uplink_gbps: float = setting(128.0, gt=0, description="PCIe switch to CPU socket")
    nvlink_gbps: float = setting(0.0, ge=0, description="NVLink between GPUs of a server; 0: none")

    @property
    def gpus_per_server(self) -> int:
        return self.sockets * self.switches_per_socket * self.gpus_per_switch


class ClusterSpec(Settings):
    server_groups: list[ServerGroupSpec] = setting(min_length=1)
    racks: int = setting(1, gt=0)
    rack_uplink_oversubscription: float = setting(
        1.0, ge=1.0, description="sum of a rack's NIC bandwidth / its uplink bandwidth"
    )
    gpu_speed: dict[str, float] = setting(factory=dict, description="overrides of GPU_SPEED")

    def _check(self) -> None:
        n_servers = sum(g.count for g in self.server_groups)
        if self.racks > n_servers:
            raise ValueError(f"racks: expected at most the number of servers ({n_servers}), got {self.racks}")
        speeds = {**GPU_SPEED, **self.gpu_speed}
        for i, g in enumerate(self.server_groups):
            if g.gpu_type not in speeds:
                raise ValueError(
                    f"server_groups.{i}.gpu_type: unknown GPU type {g.gpu_type!r}; expected one of "
                    f"{sorted(speeds)} or an entry in gpu_speed"
                )
        for k, v in self.gpu_speed.items():
            if v <= 0:
                raise ValueError(f"gpu_speed.{k}: expected a positive relative speed, got {v}")


def uniform_cluster(
    servers: int,
    gpus_per_server: int = 8,
    *,
    sockets: int = 2,
    gpu_type: str = "V100",
    racks: int = 1,
    nic_gbps: float = 25.0,
    **kw: float,
) -> ClusterSpec:
    """A homogeneous cluster; GPUs spread as evenly as possible over sockets and switches."""
    switches = 2 if gpus_per_server % (sockets * 2) == 0 else 1
    per_switch = gpus_per_server // (sockets * switches)
    if per_switch * sockets * switches != gpus_per_server:
        sockets, switches, per_switch = 1, 1, gpus_per_server
    group = ServerGroupSpec(
        count=servers,
        sockets=sockets,
        switches_per_socket=switches,
        gpus_per_switch=per_switch,
        gpu_type=gpu_type,
        nic_gbps=nic_gbps,
        **kw,
    )
    return ClusterSpec(server_groups=[group], racks=racks)
