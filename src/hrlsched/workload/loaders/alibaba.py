"""Alibaba GPU cluster trace 2023 (alibaba/clusterdata,
``cluster-trace-gpu-v2023``; Weng et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
ATC'23).

Pod list (``openb_pod_list_*.csv``): ``name,cpu_milli,memory_mib,num_gpu,
gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time``; times in seconds from the trace's start. A record's
arrival is ``creation_time``; its duration ``deletion_time -
scheduled_time`` (None for a pod never scheduled: empty ``scheduled_time``);
``gpu_milli``/1000 is the share of each GPU a pod asks for (GPU sharing);
``gpu_spec`` the GPU models it accepts (empty: any; kept as ``gpu_type``);
``qos`` (LS, BE, Burstable, Guaranteed) goes to ``user`` (the queue) and
``pod_phase`` to ``status``. CPU-only pods (``num_gpu`` 0) are kept with 0
GPUs; the conversion to jobs drops them and says so.

Node list (``openb_node_list_*.csv``): ``sn,cpu_milli,memory_mib,gpu,model``.
``cluster_spec`` groups identical nodes into server groups, one per (GPU
model, GPUs, CPU, memory). The trace gives no PCIe, socket or network
layout: a server has 2 sockets when its GPU count is even (1 otherwise),
GPUs spread over 1 or 2 PCIe switches per socket like
``cluster.spec.uniform_cluster``; links keep the ``ServerGroupSpec``
defaults. GPU speeds: V100M16/V100M32 are V100s; G2 and G3 are anonymised
by the publishers, and count as the reference GPU (``unknown_speed``, 1.0)
unless told otherwise.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hrlsched.cluster.spec import GPU_SPEED, ClusterSpec, ServerGroupSpec
from hrlsched.workload.loaders.base import (
    TraceFormatError,
    TraceRecord,
    check_min,
    optional,
    parse_float,
    parse_int,
    parse_str,
    read_csv_rows,
    row_error,
)

POD_FIELDS = {"name": parse_str, "cpu_milli": parse_int, "memory_mib": parse_int, "num_gpu": parse_int,
              "gpu_milli": parse_int, "gpu_spec": str, "qos": str, "pod_phase": str,
              "creation_time": parse_float, "deletion_time": optional(parse_float),
              "scheduled_time": optional(parse_float)}
POD_WHAT = {"name": "a pod name", "cpu_milli": "whole milli-cores", "memory_mib": "whole MiB",
            "num_gpu": "a whole number of GPUs", "gpu_milli": "whole milli-GPUs (0-1000)", "gpu_spec": "GPU models or empty",
            "qos": "a QoS class", "pod_phase": "a pod phase", "creation_time": "seconds (a number)",
            "deletion_time": "seconds (a number) or empty", "scheduled_time": "seconds (a number) or empty"}

NODE_FIELDS = {"sn": parse_str, "cpu_milli": parse_int, "memory_mib": parse_int, "gpu": parse_int, "model": str}
NODE_WHAT = {"sn": "a node name", "cpu_milli": "whole milli-cores", "memory_mib": "whole MiB",
             "gpu": "a whole number of GPUs", "model": "a GPU model (empty for a CPU node)"}

# GPU models of the trace that are a known type under another name.
GPU_ALIASES: dict[str, str] = {"V100M16": "V100", "V100M32": "V100"}


def load(path: str | Path) -> list[TraceRecord]:
    """The pod list."""
    out = []
    for no, r in read_csv_rows(path, POD_FIELDS, POD_WHAT):
        for f in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time"):
            check_min(path, no, r, f, 0)
        milli = int(r["gpu_milli"])  # type: ignore[arg-type]
        if milli > 1000:
            raise row_error(path, no, "gpu_milli", "at most 1000 (one whole GPU)", milli)
        if int(r["num_gpu"]) > 0 and milli == 0:  # type: ignore[arg-type]
            raise row_error(path, no, "gpu_milli", "> 0 for a pod with GPUs", milli)
        start, end = r["scheduled_time"], r["deletion_time"]
        duration = None
        if start is not None:
            if end is None:
                raise row_error(path, no, "deletion_time", "a time for a scheduled pod", "")
            if end < start:  # type: ignore[operator]
                raise row_error(path, no, "deletion_time", f">= scheduled_time ({start})", end)
            # A pod deleted the second it started ran for a moment: keep it positive.
            duration = max(float(end) - float(start), 1.0)  # type: ignore[arg-type]
        out.append(TraceRecord(
            name=str(r["name"]), arrival_s=float(r["creation_time"]), gpus=int(r["num_gpu"]),  # type: ignore[arg-type]
            duration_s=duration, user=str(r["qos"]) or "default", status=str(r["pod_phase"]) or None,
            gpu_type=str(r["gpu_spec"]) or None, gpu_fraction=milli / 1000 if milli else 1.0,
        ))
    out.sort(key=lambda t: t.arrival_s)
    return out


def load_nodes(path: str | Path) -> list[dict[str, object]]:
    """The node list: one dict per node (sn, cpu_milli, memory_mib, gpu, model)."""
    nodes = []
    for no, r in read_csv_rows(path, NODE_FIELDS, NODE_WHAT):
        check_min(path, no, r, "cpu_milli", 1)
        check_min(path, no, r, "memory_mib", 1)
        check_min(path, no, r, "gpu", 0)
        if int(r["gpu"]) > 0 and not r["model"]:  # type: ignore[arg-type]
            raise row_error(path, no, "model", "a GPU model for a node with GPUs", "")
        nodes.append({**r, "line": no})
    if not nodes:
        raise TraceFormatError(f"{path}: no nodes")
    return nodes


def _layout(gpus: int) -> tuple[int, int, int]:
    """(sockets, switches per socket, GPUs per switch) for ``gpus`` per server."""
    sockets = 2 if gpus % 2 == 0 else 1
    switches = 2 if gpus % (sockets * 2) == 0 else 1
    return sockets, switches, gpus // (sockets * switches)


def cluster_spec(path: str | Path, unknown_speed: float = 1.0, racks: int = 1) -> ClusterSpec:
    """A heterogeneous ``ClusterSpec`` from a node list: one server group per
    (GPU model, GPUs, CPU, memory); nodes without GPUs are left out."""
    nodes = load_nodes(path)
    groups: Counter[tuple[str, int, int, int]] = Counter(
        (str(n["model"]), int(n["gpu"]), int(n["cpu_milli"]), int(n["memory_mib"]))  # type: ignore[call-overload]
        for n in nodes if int(n["gpu"]) > 0  # type: ignore[call-overload]
    )
    if not groups:
        raise TraceFormatError(f"{path}: no node with GPUs")
    speeds: dict[str, float] = {}
    server_groups = []
    for (model, gpus, cpu, mem), count in sorted(groups.items()):
        if model not in GPU_SPEED:
            speeds[model] = GPU_SPEED[GPU_ALIASES[model]] if model in GPU_ALIASES else unknown_speed
        sockets, switches, per_switch = _layout(gpus)
        server_groups.append(ServerGroupSpec(
            name=f"{model}-{gpus}g-{cpu // 1000}c", count=count, sockets=sockets, switches_per_socket=switches,
            gpus_per_switch=per_switch, gpu_type=model, cores_per_socket=max(cpu // 1000 // sockets, 1),
            memory_gb=mem / 1024,
        ))
    return ClusterSpec(server_groups=server_groups, racks=racks, gpu_speed=speeds)
