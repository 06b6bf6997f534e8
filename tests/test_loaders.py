"""Trace loaders on small files written here in each format, malformed rows
included; validation on the public files (shared_data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hrlsched.cluster import Topology
from hrlsched.workload.loaders import (
    FORMATS,
    TraceFormatError,
    TraceRecord,
    alibaba,
    gavel,
    generic,
    load_trace,
)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


ITP = "job_id,submission_time,duration,num_gpu\na1,100,2429,8\na2,50,1532,1\na3,300,700,64\n"
POLLUX = "name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\nncf-1,135,ncf,1,32768\n"
PHILLY = ("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
          "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n")
ALIBABA = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
           "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
           "p1,6000,12288,1,460,V100M16|V100M32,BE,Failed,427061,427100,427070\n"
           "p2,8000,1000,0,0,,BE,Succeeded,500,900,510\n"
           "p3,11908,47104,1,1000,,BE,Pending,10001278,10001403,\n")
NODES = ("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,64000,262144,2,P100\n"
         "n2,96000,393216,8,G2\nn3,96000,786432,8,V100M32\nn4,32000,131072,0,\n")
TIRESIAS = ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n"
            "1,8,30,133,resnet50,147,23\n")
GAVEL10 = ("ResNet-50 (batch size 64)\tpython3 main.py\timage_classification/imagenet\t--num_minibatches\t1\t2931\t1\t1\t-1.000000\t0\n"
           "A3C\tpython3 main.py\trl\t--max-steps\t0\t1000\t2\t1\t-1.000000\t12.5\n")
GAVEL7 = ("LM (batch size 5)\tcd x && python main.py\t--steps\t1\t2799809\t12.000000\t1\n"
          "CycleGAN\tcd x && python3 cyclegan.py\t--n_steps\t1\t689277\t632320.000000\t4\n")
THROUGHPUTS = {"v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 4.0}, "('A3C', 2)": {"null": 10.0},
                        "('LM (batch size 5)', 1)": {"null": 100.0}}}


def test_itp(tmp_path: Path) -> None:
    recs = load_trace(write(tmp_path / "c.csv", ITP), "itp")
    assert [r.name for r in recs] == ["a2", "a1", "a3"]  # sorted by arrival
    assert recs[1] == TraceRecord(name="a1", arrival_s=100.0, gpus=8, duration_s=2429.0)


def test_pollux_workload(tmp_path: Path) -> None:
    recs = load_trace(write(tmp_path / "w.csv", POLLUX), "pollux")
    assert recs[0].model == "cifar10" and recs[0].gpus == 6 and recs[0].batch_size == 2048
    assert recs[0].duration_s is None and recs[1].arrival_s == 135.0


def test_philly_arrivals_from_first_timestamp(tmp_path: Path) -> None:
    recs = load_trace(write(tmp_path / "p.csv", PHILLY), "philly")
    assert [r.arrival_s for r in recs] == [0.0, 48 * 60 + 52.0]
    assert recs[0].user == "6214e9" and recs[0].gpus == 2 and recs[0].duration_s == 2951.0


def test_alibaba_pods(tmp_path: Path) -> None:
    recs = {r.name: r for r in load_trace(write(tmp_path / "pods.csv", ALIBABA), "alibaba")}
    assert recs["p0"].duration_s == 12537496.0 and recs["p0"].user == "LS" and recs["p0"].status == "Running"
    assert recs["p1"].gpu_fraction == pytest.approx(0.46) and recs["p1"].gpu_type == "V100M16|V100M32"
    assert recs["p1"].duration_s == 30.0
    assert recs["p2"].gpus == 0  # CPU-only pod kept, dropped at conversion
    assert recs["p3"].duration_s is None  # never scheduled


def test_alibaba_nodes_build_a_heterogeneous_cluster(tmp_path: Path) -> None:
    spec = alibaba.cluster_spec(write(tmp_path / "nodes.csv", NODES), unknown_speed=0.8)
    by_type = {g.gpu_type: g for g in spec.server_groups}
    assert set(by_type) == {"P100", "G2", "V100M32"}  # the CPU node is left out
    assert by_type["P100"].count == 2 and by_type["P100"].gpus_per_server == 2
    assert by_type["G2"].gpus_per_server == 8 and by_type["V100M32"].memory_gb == 768
    assert spec.gpu_speed == {"G2": 0.8, "V100M32": 1.0}
    assert Topology.from_spec(spec).n_gpus == 2 * 2 + 8 + 8


def test_tiresias(tmp_path: Path) -> None:
    recs = load_trace(write(tmp_path / "t.csv", TIRESIAS), "tiresias")
    assert [(r.gpus, r.arrival_s, r.duration_s, r.model) for r in recs] == [(1, 0.0, 164.0, "vgg19"), (8, 30.0, 147.0, "resnet50")]


def test_gavel_both_layouts_and_durations_from_throughputs(tmp_path: Path) -> None:
    tp = tmp_path / "tp.json"
    tp.write_text(json.dumps(THROUGHPUTS))
    recs = load_trace(write(tmp_path / "a.trace", GAVEL10), "gavel", throughputs=tp)
    assert (recs[0].model, recs[0].batch_size, recs[0].gpus, recs[0].duration_s) == ("ResNet-50", 64, 1, 2931 / 4.0)
    assert (recs[1].model, recs[1].batch_size, recs[1].gpus, recs[1].arrival_s) == ("A3C", None, 2, 12.5)
    assert recs[1].duration_s == 100.0
    old = load_trace(write(tmp_path / "b.trace", GAVEL7), "gavel", throughputs=tp)
    assert (old[0].model, old[0].gpus, old[0].arrival_s, old[0].duration_s) == ("LM", 1, 12.0, 27998.09)
    assert (old[1].model, old[1].gpus, old[1].duration_s) == ("CycleGAN", 4, None)  # a pair Gavel did not measure
    assert gavel.load(tmp_path / "b.trace")[0].duration_s is None  # no throughputs, no duration


def test_generic_round_trip(tmp_path: Path) -> None:
    recs = [
        TraceRecord("a", 0.5, 2, 1234.25, "resnet-50", 64, "alice", "Failed", "V100", 0.5),
        TraceRecord("b", 10.0, 0, None),
        TraceRecord("c,d", 3.0, 8, 1 / 3, user="bob"),
    ]
    generic.dump(recs, tmp_path / "g.csv")
    assert generic.load(tmp_path / "g.csv") == sorted(recs, key=lambda r: r.arrival_s)


def test_convert_round_trip_of_every_format(tmp_path: Path) -> None:
    files = {"itp": ITP, "pollux": POLLUX, "philly": PHILLY, "alibaba": ALIBABA, "tiresias": TIRESIAS}
    for fmt, text in files.items():
        recs = load_trace(write(tmp_path / f"{fmt}.in", text), fmt)
        generic.dump(recs, tmp_path / f"{fmt}.csv")
        assert load_trace(tmp_path / f"{fmt}.csv", "generic") == recs, fmt


@pytest.mark.parametrize(
    ("fmt", "text", "line", "field"),
    [
        ("itp", "job_id,submission_time,duration,num_gpu\na,1,2,1\nb,x,2,1\n", 3, "submission_time"),
        ("itp", "job_id,submission_time,duration,num_gpu\na,1,2,1.5\n", 2, "num_gpu"),
        ("itp", "job_id,submission_time,duration,num_gpu\na,1,0,1\n", 2, "duration"),
        ("itp", "job_id,submission_time,duration,num_gpu\na,1,5,0\n", 2, "num_gpu"),
        ("itp", "job_id,submission_time,duration,num_gpu\n,1,5,1\n", 2, "job_id"),
        ("pollux", "name,time,application,num_replicas,batch_size\nj,1,cifar10,2,-4\n", 2, "batch_size"),
        ("philly", "timestamp,duration,num_gpus,gpu_time,cluster\n2017/10/09 07:01:55,6,1,6,c\n", 2, "timestamp"),
        ("tiresias", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,nan,30\n", 2, "duration"),
        ("alibaba", ALIBABA.splitlines()[0] + "\np,1,1,1,1500,,LS,Running,0,10,0\n", 2, "gpu_milli"),
        ("alibaba", ALIBABA.splitlines()[0] + "\np,1,1,1,1000,,LS,Running,0,5,10\n", 2, "deletion_time"),
        ("generic", "arrival_s,gpus,duration_s\n1,1,\n2,1,-3\n", 3, "duration_s"),
        ("gavel", "ResNet-50 (batch size 64)\tc\tw\t-n\t1\tmany\t1\t1\t-1\t0\n", 1, "total_steps"),
        ("gavel", "ResNet-50 (batch size 64)\tc\tw\t-n\t1\t10\t0\t1\t-1\t0\n", 1, "scale_factor"),
    ],
)
def test_malformed_rows_name_file_line_field(tmp_path: Path, fmt: str, text: str, line: int, field: str) -> None:
    path = write(tmp_path / f"bad.{fmt}", text)
    with pytest.raises(TraceFormatError) as e:
        load_trace(path, fmt, **({"throughputs": None} if fmt == "gavel" else {}))
    msg = str(e.value)
    assert msg.startswith(f"{path}:{line}: field {field}: expected "), msg


def test_structural_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"c\.csv:1: missing column\(s\) num_gpu"):
        load_trace(write(tmp_path / "c.csv", "job_id,submission_time,duration\na,1,2\n"), "itp")
    with pytest.raises(TraceFormatError, match=r"d\.csv:3: expected 4 fields"):
        load_trace(write(tmp_path / "d.csv", "job_id,submission_time,duration,num_gpu\na,1,2,1\nb,1,2\n"), "itp")
    with pytest.raises(TraceFormatError, match=r"e\.trace:1: expected 10 tab-separated fields"):
        load_trace(write(tmp_path / "e.trace", "a\tb\tc\n"), "gavel", throughputs=None)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_trace(tmp_path / "missing.csv", "itp")
    with pytest.raises(ValueError, match="unknown trace format 'nope'"):
        load_trace(tmp_path / "c.csv", "nope")
    assert set(FORMATS) == {"itp", "pollux", "philly", "alibaba", "tiresias", "gavel", "generic"}


# ------------------------------------------------------- the public files


def test_real_itp_matches_published_statistics(shared_data: Path) -> None:
    recs = [r for f in sorted((shared_data / "itp").glob("cluster*.csv")) for r in load_trace(f, "itp")]
    assert len(recs) == 69351  # SOURCES.md
    g = np.array([r.gpus for r in recs])
    d = np.array([r.duration_s for r in recs])
    # SOURCES.md: 83% 1 GPU, 2.1% 2, 3.4% 4, 10.1% 8; median 10.5 ks, p99 210 ks; 8+ GPUs ~79% of GPU time.
    assert np.mean(g == 1) == pytest.approx(0.83, abs=0.005)
    assert np.mean(g == 8) == pytest.approx(0.101, abs=0.002)
    assert np.median(d) == pytest.approx(10500, rel=0.01)
    assert np.percentile(d, 99) == pytest.approx(210000, rel=0.01)
    assert (g * d)[g >= 8].sum() / (g * d).sum() == pytest.approx(0.79, abs=0.01)
    assert d.min() >= 600


def test_real_pollux_philly_alibaba_gavel(shared_data: Path) -> None:
    for k in range(1, 9):
        recs = load_trace(shared_data / "pollux" / "workloads" / f"workload-{k}.csv", "pollux")
        assert len(recs) == 160 and {r.model for r in recs} <= {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert len(load_trace(shared_data / "pollux" / "traces" / "philly.csv", "philly")) == 82247
    pods = load_trace(shared_data / "alibaba-gpu-2023" / "openb_pod_list_default.csv", "alibaba")
    assert len(pods) == 8152 and sum(r.gpus == 0 for r in pods) == 1088
    spec = alibaba.cluster_spec(shared_data / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    assert sum(g.count for g in spec.server_groups) == 1213
    assert {g.gpu_type for g in spec.server_groups} == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}
