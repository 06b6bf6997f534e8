"""Trace loaders, one module per format. Each returns ``TraceRecord``s and
rejects a malformed row with an error naming the file, line and field."""

from hrlsched.workload.loaders.base import TraceRecord, read_csv_rows

__all__ = ["TraceRecord", "read_csv_rows"]
