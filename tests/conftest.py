"""Shared fixtures: small clusters and workloads built in code."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrlsched.cluster import ClusterSpec, ServerGroupSpec, Topology
from hrlsched.core import CATALOGUE
from hrlsched.perf import OptimusModel

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def small_spec(servers: int = 2, racks: int = 1) -> ClusterSpec:
    return ClusterSpec(
        server_groups=[ServerGroupSpec(count=servers, sockets=2, switches_per_socket=2, gpus_per_switch=2)],
        racks=racks,
    )


@pytest.fixture
def topo() -> Topology:
    return Topology.from_spec(small_spec())


@pytest.fixture
def perf(topo: Topology) -> OptimusModel:
    return OptimusModel(topo, CATALOGUE)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"public data folder {SHARED_DATA} is absent (see ../shared/data/SOURCES.md)")
    return SHARED_DATA
