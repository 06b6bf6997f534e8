"""Cluster topology: specs, index arrays and placements."""

from hrlsched.cluster.placement import Placement
from hrlsched.cluster.spec import GPU_SPEED, ClusterSpec, ServerGroupSpec, uniform_cluster
from hrlsched.cluster.topology import Topology

__all__ = ["GPU_SPEED", "ClusterSpec", "Placement", "ServerGroupSpec", "Topology", "uniform_cluster"]
