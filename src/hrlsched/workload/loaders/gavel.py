"""Gavel trace files (stanford-futuredata/gavel, ``scheduler/traces/**/*.trace``;
Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep
Learning Workloads", OSDI'20). One job a line, tab-separated, no header.
Two layouts exist in that repository, told apart by the number of fields:

- 10 fields (what ``scheduler/utils.py`` ``parse_trace`` reads):
  ``job_type, command, working_directory, num_steps_arg, needs_data_dir,
  total_steps, scale_factor, priority_weight, SLO, arrival_time``;
- 7 fields (the older ``traces/msr/**`` files):
  ``job_type, command, num_steps_arg, needs_data_dir, total_steps,
  arrival_time, scale_factor``.

``job_type`` is e.g. ``ResNet-50 (batch size 64)``: model and batch size.
``scale_factor`` is the job's GPU count, ``total_steps`` its work. A Gavel
trace has no duration: as in Gavel's simulator, duration = total_steps /
isolated throughput (steps/s) of (job_type, scale_factor) on one worker type,
from Gavel's ``simulation_throughputs.json`` when given (``throughputs``;
``worker_type`` v100 by default). Without it, or for a (job_type,
scale_factor) that file does not have, ``duration_s`` is None.
"""

from __future__ import annotations

import re
from pathlib import Path

from hrlsched.workload.loaders.base import TraceFormatError, TraceRecord, open_text, row_error

JOB_TYPE = re.compile(r"^(?P<model>.+?)(?: \(batch size (?P<batch>\d+)\))?$")


def load_throughputs(path: str | Path, worker_type: str = "v100") -> dict[str, float]:
    """``str((job_type, scale_factor))`` -> isolated steps/s on ``worker_type``
    (read by ``cluster.gpu_speed.read_gavel_throughputs``, which the GPU
    speeds of the performance models read too)."""
    from hrlsched.cluster.gpu_speed import GavelFormatError, read_gavel_throughputs

    try:
        data = read_gavel_throughputs(path)
    except GavelFormatError as e:
        raise TraceFormatError(str(e)) from None
    if worker_type not in data:
        raise TraceFormatError(f"{path}: no worker type {worker_type!r}; expected one of {sorted(data)}")
    return {str(key): v for key, v in data[worker_type].items()}


def load(path: str | Path, throughputs: str | Path | None = None, worker_type: str = "v100") -> list[TraceRecord]:
    tput = load_throughputs(throughputs, worker_type) if throughputs is not None else None
    out = []
    with open_text(path) as fh:
        for no, line in enumerate(fh, start=1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            f = line.split("\t")
            if len(f) == 10:
                job_type, steps, scale, arrival = f[0], f[5], f[6], f[9]
                names = ("total_steps", "scale_factor", "arrival_time")
            elif len(f) == 7:
                job_type, steps, arrival, scale = f[0], f[4], f[5], f[6]
                names = ("total_steps", "scale_factor", "arrival_time")
            else:
                raise TraceFormatError(
                    f"{path}:{no}: expected 10 tab-separated fields (job_type, command, working_directory, "
                    f"num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time) "
                    f"or the older 7, got {len(f)}"
                )
            vals: dict[str, float] = {}
            for name, raw, kind in zip(names, (steps, scale, arrival), ("int", "int", "float")):
                try:
                    v = float(raw)
                    if kind == "int" and not v.is_integer():
                        raise ValueError
                except ValueError:
                    expected = "a whole number" if kind == "int" else "seconds (a number)"
                    raise row_error(path, no, name, expected, raw) from None
                vals[name] = v
            if vals["total_steps"] < 1:
                raise row_error(path, no, "total_steps", ">= 1", int(vals["total_steps"]))
            if vals["scale_factor"] < 1:
                raise row_error(path, no, "scale_factor", ">= 1 (GPUs)", int(vals["scale_factor"]))
            if vals["arrival_time"] < 0:
                raise row_error(path, no, "arrival_time", ">= 0", vals["arrival_time"])
            m = JOB_TYPE.match(job_type.strip())
            if not job_type.strip() or m is None:
                raise row_error(path, no, "job_type", "a job type such as 'ResNet-50 (batch size 64)'", job_type)
            gpus = int(vals["scale_factor"])
            duration = None
            if tput is not None:
                # A pair Gavel did not measure (e.g. the older traces' multi-GPU A3C or
                # CycleGAN) has no duration; the conversion to jobs drops it and says so.
                rate = tput.get(str((job_type.strip(), gpus)))
                duration = vals["total_steps"] / rate if rate else None
            out.append(TraceRecord(
                name=f"gavel-{no}", arrival_s=vals["arrival_time"], gpus=gpus, duration_s=duration,
                model=m.group("model"), batch_size=int(m.group("batch")) if m.group("batch") else None,
            ))
    out.sort(key=lambda t: t.arrival_s)
    return out
