import numpy as np
import pytest

from hrlsched.cluster import ClusterSpec, ServerGroupSpec, Topology, uniform_cluster
from hrlsched.schema import SchemaError


def test_index_arrays_follow_the_hierarchy(topo: Topology) -> None:
    assert topo.n_gpus == 16 and topo.n_switches == 8 and topo.n_sockets == 4 and topo.n_servers == 2
    # gpu -> switch -> socket -> server are consistent and contiguous
    assert list(topo.gpu_switch[:4]) == [0, 0, 1, 1]
    assert list(topo.gpu_socket[:8]) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert list(topo.gpu_server) == [0] * 8 + [1] * 8
    assert list(topo.server_gpus) == [8, 8]
    assert list(topo.server_first_gpu) == [0, 8]
    assert np.all(topo.gpu_server == topo.socket_server[topo.switch_socket[topo.gpu_switch]])


def test_heterogeneous_groups_and_racks() -> None:
    spec = ClusterSpec(
        server_groups=[
            ServerGroupSpec(name="a", count=3, gpu_type="V100"),
            ServerGroupSpec(name="b", count=1, sockets=1, switches_per_socket=1, gpus_per_switch=4, gpu_type="K80"),
        ],
        racks=2,
        rack_uplink_oversubscription=2.0,
    )
    t = Topology.from_spec(spec)
    assert t.n_gpus == 3 * 8 + 4
    assert t.gpu_type_names == ("K80", "V100")
    assert np.all(t.gpu_speed[-4:] < t.gpu_speed[0])
    assert list(t.server_rack) == [0, 0, 1, 1]
    assert t.rack_uplink_gbps[0] == pytest.approx(2 * 25 / 2.0)


@pytest.mark.parametrize(
    ("group", "field"),
    [
        ({"count": 0}, "count"),
        ({"count": 1, "gpus_per_switch": 0}, "gpus_per_switch"),
        ({"count": 1, "nic_gbps": -1}, "nic_gbps"),
        ({"count": 1, "gpu_type": "Z9"}, "gpu_type"),
        ({"count": 1, "bogus": 3}, "bogus"),
    ],
)
def test_bad_spec_names_the_field(group: dict, field: str) -> None:
    with pytest.raises(SchemaError, match=field):
        ClusterSpec(server_groups=[group])


def test_uniform_cluster_shapes() -> None:
    t = Topology.from_spec(uniform_cluster(4, 4, sockets=1, gpu_type="T4"))
    assert t.n_gpus == 16 and t.n_servers == 4
