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


@pytest.fixture
def measured(shared_data: Path) -> tuple[Topology, object]:
    """Four servers of 4 T4 GPUs and the measured backend on the Pollux traces (Pollux's
    applications, with their gradient statistics)."""
    from hrlsched.perf.measured import MeasuredModel

    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(
        count=4, sockets=1, switches_per_socket=2, gpus_per_switch=2, gpu_type="T4", cores_per_socket=48,
        memory_gb=192)]))
    return topo, MeasuredModel(topo, CATALOGUE, str(shared_data / "pollux" / "traces"))



def fuzz_tally_dir() -> Path:
    """Where fuzz tests leave their case counts for the session summary: set
    by the controller before xdist starts its workers, which inherit it."""
    import os

    return Path(os.environ["HRLSCHED_FUZZ_TALLY"])


def pytest_configure(config) -> None:  # noqa: ANN001
    import os
    import tempfile

    if hasattr(config, "workerinput"):  # an xdist worker: the controller's folder
        os.environ["HRLSCHED_FUZZ_TALLY"] = config.workerinput["hrlsched_fuzz_tally"]
    elif "HRLSCHED_FUZZ_TALLY" not in os.environ:
        os.environ["HRLSCHED_FUZZ_TALLY"] = tempfile.mkdtemp(prefix="hrlsched-fuzz-")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001
    import os

    node.workerinput["hrlsched_fuzz_tally"] = os.environ["HRLSCHED_FUZZ_TALLY"]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    """Say how many random cases the engine fuzz tests tried."""
    import json
    import shutil

    if hasattr(config, "workerinput"):  # xdist workers: the controller reports
        return
    d = fuzz_tally_dir()
    if not d.is_dir():
        return
    total: dict[str, int] = {}
    for f in d.glob("*.json"):
        for k, v in json.loads(f.read_text()).items():
            total[k] = total.get(k, 0) + v
    shutil.rmtree(d, ignore_errors=True)
    if total:
        terminalreporter.write_line("engine fuzz: " + ", ".join(f"{v} {k}" for k, v in sorted(total.items()))
                                    + " cases tried")
