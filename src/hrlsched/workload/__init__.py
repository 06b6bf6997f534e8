"""Jobs, the model catalogue, trace loaders and workload generators."""

from hrlsched.workload.catalogue import CATALOGUE, ModelProfile, get_profile
from hrlsched.workload.job import Job

__all__ = ["CATALOGUE", "Job", "ModelProfile", "get_profile"]
