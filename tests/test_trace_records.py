import re
from pathlib import Path

import numpy as np
import pytest

from hrlsched.cluster import Topology
from hrlsched.core import CATALOGUE
from hrlsched.perf import OptimusModel
from hrlsched.workload.loaders import generic, itp, philly, pollux
from hrlsched.workload.loaders.base import TraceRecord
from hrlsched.workload.trace import select, to_jobs
from tests.conftest import small_spec


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_pollux_workload(tmp_path: Path) -> None:
    f = write(tmp_path, "w.csv", "name,time,application,num_replicas,batch_size\ncifar10-0,53,cifar10,6,2048\nncf-1,60,ncf,1,32768\n")
    recs = pollux.load(f)
    assert [(r.name, r.arrival_s, r.gpus, r.model, r.batch_size) for r in recs] == [
        ("cifar10-0", 53.0, 6, "cifar10", 2048), ("ncf-1", 60.0, 1, "ncf", 32768)]


def test_itp_and_philly(tmp_path: Path) -> None:
    f = write(tmp_path, "c.csv", "job_id,submission_time,duration,num_gpu\nb,200,900,8\na,100,600,1\n")
    recs = itp.load(f)
    assert [r.name for r in recs] == ["a", "b"] and recs[1].gpus == 8 and recs[1].duration_s == 900
    f = write(tmp_path, "p.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,c1\n"
                                  "2017-10-09 07:00:55,10.0,2,20.0,c2\n")
    recs = philly.load(f)
    assert [r.arrival_s for r in recs] == [0.0, 60.0] and recs[0].user == "c2"


@pytest.mark.parametrize(
    ("loader", "text", "message"),
    [
        (pollux.load, "name,time,application,num_replicas,batch_size\nx,abc,cifar10,1,128\n", "w.csv:2: field time: expected"),
        (pollux.load, "name,time,application,num_replicas,batch_size\nx,1,cifar10,0,128\n", "w.csv:2: field num_replicas: expected >= 1"),
        (pollux.load, "name,time,application\nx,1,cifar10\n", "w.csv:1: missing column(s) num_replicas, batch_size"),
        (itp.load, "job_id,submission_time,duration,num_gpu\nx,1,10,2.5\n", "w.csv:2: field num_gpu: expected a whole number"),
        (itp.load, "job_id,submission_time,duration,num_gpu\nx,1,10\n", "w.csv:2: expected 4 fields"),
        (philly.load, "timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,1,1,1,c\n", "w.csv:2: field timestamp"),
        (generic.load, "name,arrival_s,gpus,duration_s,model,batch_size,user\nx,1,1,-5,,,u\n", "w.csv:2: field duration_s"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path: Path, loader, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        loader(write(tmp_path, "w.csv", text))


def test_generic_round_trip(tmp_path: Path) -> None:
    recs = [TraceRecord("a", 0.0, 2, 120.5, "vgg-16", 64, "u1"), TraceRecord("b", 3.25, 1, None, None, None, "default")]
    generic.dump(recs, tmp_path / "g.csv")
    assert generic.load(tmp_path / "g.csv") == recs


def test_select_window_sample_and_load() -> None:
    rng = np.random.default_rng(0)
    recs = [TraceRecord(str(i), float(10 * i), 1, 100.0) for i in range(100)]
    out = select(recs, 100.0, 600.0, None, 2.0, rng)
    assert len(out) == 50 and out[0].arrival_s == 0.0 and out[-1].arrival_s == pytest.approx(245.0)
    assert len(select(recs, 0.0, None, 7, 1.0, rng)) == 7


def test_trace_jobs_run_for_their_duration_alone() -> None:
    topo = Topology.from_spec(small_spec())
    perf = OptimusModel(topo, CATALOGUE)
    recs = [TraceRecord("a", 0.0, 4, 3600.0), TraceRecord("b", 5.0, 64, 100.0), TraceRecord("c", 6.0, 1, 10.0)]
    jobs = to_jobs(recs, perf.work_sizer(), np.random.default_rng(0), oversize="cap")
    assert [j.requested_gpus for j in jobs] == [4, 16, 1]
    for j, r in zip(jobs, recs):
        assert j.total_samples / perf.isolated_speed(j, j.requested_gpus, j.num_ps_requested) == pytest.approx(r.duration_s)
    assert len(to_jobs(recs, perf.work_sizer(), np.random.default_rng(0), oversize="drop")) == 2
    # Heavier jobs (more GPU-time) get models that cost more per iteration.
    cost = [CATALOGUE[j.model].theta[0] * CATALOGUE[j.model].default_batch + CATALOGUE[j.model].theta[1] for j in jobs]
    assert cost[0] >= cost[2]


def test_real_traces_load(shared_data: Path) -> None:
    assert len(itp.load(shared_data / "itp" / "cluster01.csv")) > 1000
    assert len(pollux.load(shared_data / "pollux" / "workloads" / "workload-6.csv")) == 160
    assert len(philly.load(shared_data / "pollux" / "traces" / "philly.csv")) == 82247
