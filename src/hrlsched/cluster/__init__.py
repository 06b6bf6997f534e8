"""Cluster topology: specs and index arrays."""

from hrlsched.cluster.spec import GPU_SPEED, ClusterSpec, ServerGroupSpec, uniform_cluster
from hrlsched.cluster.topology import Topology
from hrlsched.core.placement import Placement

__all__ = ["GPU_SPEED", "ClusterSpec", "Placement", "ServerGroupSpec", "Topology", "uniform_cluster"]
