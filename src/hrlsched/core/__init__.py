"""The ground floor: jobs, the model catalogue and placements, which every
other part (workload builders, performance models, engine, policies) reads
and none of which imports anything above it."""

from hrlsched.core.catalogue import CATALOGUE, ModelProfile, get_profile
from hrlsched.core.job import Job
from hrlsched.core.placement import Placement

__all__ = ["CATALOGUE", "Job", "ModelProfile", "Placement", "get_profile"]
