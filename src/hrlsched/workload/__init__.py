"""Trace loaders and workload generators (jobs and the catalogue are in
``hrlsched.core``)."""
