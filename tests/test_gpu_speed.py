"""Per-(model, GPU type) speeds (``cluster.gpu_speed``): Gavel's throughputs
file, the mapping of our models to Gavel's job types, the fallback without
data, and what the backends and Gavel's allocation make of them. Each test
writes a small file in Gavel's format and points ``HRLSCHED_DATA`` at it;
the last ones read the real file and skip without it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from hrlsched.cluster import ClusterSpec, Placement, ServerGroupSpec, Topology
from hrlsched.cluster.gpu_speed import (
    GAVEL_COUNTERPART,
    GavelFormatError,
    gavel_ratios,
    mapping_table,
    model_speed,
    nearest_batch,
    read_gavel_throughputs,
)
from hrlsched.cluster.spec import GPU_SPEED
from hrlsched.core import CATALOGUE
from hrlsched.perf.analytic import AnalyticModel
from hrlsched.perf.optimus import OptimusModel
from hrlsched.policies.gavel import Gavel
from tests.conftest import SHARED_DATA
from tests.helpers import job, make_view

# steps/s alone on one GPU, per (job type, Gavel worker type): Recommendation
# is faster on P100 than on V100 (as in Gavel's measurements), ResNet-50 half as fast.
TOY = {
    "ResNet-50 (batch size 16)": {"v100": 12.0, "p100": 9.0, "k80": 3.0},
    "ResNet-50 (batch size 32)": {"v100": 8.0, "p100": 4.0, "k80": 1.0},
    "ResNet-50 (batch size 64)": {"v100": 4.0, "p100": 3.0, "k80": 1.0},
    "Recommendation (batch size 512)": {"v100": 20.0, "p100": 40.0, "k80": 30.0},
    "Recommendation (batch size 1024)": {"v100": 10.0, "p100": 30.0, "k80": 5.0},
    "A3C": {"v100": 7.0, "p100": 5.0, "k80": 3.0},
}


def gavel_file(root: Path, table: dict | None = None) -> Path:
    """A Gavel ``simulation_throughputs.json``: every worker type (and its
    ``_unconsolidated`` twin) -> ``"('<job type>', <scale>)"`` -> ``{"null":
    alone, "<other key>": [both co-located]}``."""
    table = TOY if table is None else table
    data: dict = {}
    for wt in ("v100", "p100", "k80"):
        for suffix, scale in (("", 1), ("", 2), ("_unconsolidated", 2)):
            rows = data.setdefault(wt + suffix, {})
            for name, by in table.items():
                key = str((name, scale))
                rows[key] = {"null": by[wt] * (1.8 if scale == 2 else 1.0), key: [by[wt] / 2, by[wt] / 2]}
    path = root / "gavel" / "simulation_throughputs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def toy_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gavel_file(tmp_path)
    monkeypatch.setenv("HRLSCHED_DATA", str(tmp_path))
    return tmp_path


def two_types(first: str = "V100", second: str = "P100") -> Topology:
    return Topology.from_spec(ClusterSpec(server_groups=[
        ServerGroupSpec(name=first.lower(), count=1, gpu_type=first),
        ServerGroupSpec(name=second.lower(), count=1, gpu_type=second),
    ]))


# ------------------------------------------------------------------ loader
def test_reader_returns_isolated_throughputs(tmp_path: Path) -> None:
    data = read_gavel_throughputs(gavel_file(tmp_path))
    assert set(data) == {"v100", "p100", "k80", "v100_unconsolidated", "p100_unconsolidated", "k80_unconsolidated"}
    assert data["p100"][("Recommendation (batch size 512)", 1)] == 40.0
    assert data["v100"][("A3C", 2)] == pytest.approx(7.0 * 1.8)


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", r"not valid JSON"),
    ("[1, 2]", r"expected an object of worker types"),
    ('{"v100": 3}', r"key 'v100': expected an object of job types"),
    ('{"v100": {"ResNet-50": {"null": 1.0}}}', r"key 'v100' -> 'ResNet-50': expected a key"),
    ('{"v100": {"(\'A3C\', 0)": {"null": 1.0}}}', r"key 'v100' -> \"\('A3C', 0\)\": expected a key"),
    ('{"k80": {"(\'A3C\', 1)": {"other": 1.0}}}', r"key 'k80' -> \"\('A3C', 1\)\": expected an object whose 'null'"),
    ('{"k80": {"(\'A3C\', 1)": {"null": -2}}}', r"'null' is the isolated throughput .*got -2"),
    ('{"k80": {"(\'A3C\', 1)": [1.0]}}', r"'null' is the isolated throughput .*got \[1.0\]"),
])
def test_reader_names_the_file_and_key_of_malformed_input(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "simulation_throughputs.json"
    path.write_text(text)
    with pytest.raises(GavelFormatError, match=message) as err:
        read_gavel_throughputs(path)
    assert str(path) in str(err.value)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_gavel_throughputs(tmp_path / "absent.json")


def test_malformed_file_is_refused_when_a_model_needs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gavel").mkdir()
    (tmp_path / "gavel" / "simulation_throughputs.json").write_text('{"p100": {"bad key": {"null": 1}}}')
    monkeypatch.setenv("HRLSCHED_DATA", str(tmp_path))
    with pytest.raises(GavelFormatError, match="bad key"):
        two_types().type_speed("dssm")


# ----------------------------------------------------------------- mapping
def test_nearest_batch_in_ratio_smaller_on_a_tie() -> None:
    assert nearest_batch([16, 32, 64], 40) == 32
    assert nearest_batch([16, 64], 32) == 16  # 32/16 = 64/32
    assert nearest_batch([80, 40], 160) == 80
    assert nearest_batch([512, 1024], 256) == 512


def test_ratios_at_the_batch_nearest_ours(tmp_path: Path) -> None:
    ratios = gavel_ratios(gavel_file(tmp_path), {m: p.default_batch for m, p in CATALOGUE.items()})
    # resnet-50: batch 32 -> ResNet-50 (batch size 32); inception-bn: 128 -> 64.
    assert ratios["resnet-50"]["P100"] == (0.5, "ResNet-50 (batch size 32)")
    assert ratios["resnet-50"]["K80"][0] == pytest.approx(1 / 8)
    assert ratios["inception-bn"]["P100"][0] == pytest.approx(3 / 4)
    # dssm: 256 -> Recommendation (batch size 512), faster on P100 and K80.
    assert ratios["dssm"]["P100"][0] == pytest.approx(2.0) and ratios["dssm"]["K80"][0] == pytest.approx(1.5)
    assert ratios["dssm"]["V100"][0] == 1.0
    # No counterpart in the file (seq2seq -> Transformer is absent) or none at all.
    assert "seq2seq" not in ratios and "cnn-text-classification" not in ratios
    assert all(m in CATALOGUE for m in GAVEL_COUNTERPART)
    table = mapping_table(tmp_path / "gavel" / "simulation_throughputs.json")
    assert "| dssm | 256 | Recommendation (batch size 512) |" in table
    assert "| cnn-text-classification | 50 | none | - | 0.22 (GPU_SPEED) | 0.60 (GPU_SPEED) |" in table


def test_model_speed_rules(toy_data: Path) -> None:
    assert model_speed("dssm", "P100") == pytest.approx(2.0)
    assert model_speed("resnet-50", "V100") == 1.0
    assert model_speed("cnn-text-classification", "P100") == GPU_SPEED["P100"]  # no counterpart
    assert model_speed("dssm", "T4") == GPU_SPEED["T4"]  # a type Gavel did not measure
    assert model_speed("dssm", "P100", {"P100": 0.5}) == 0.5  # the spec's own figure wins
    with pytest.raises(KeyError, match="GPU type 'X9'"):
        model_speed("dssm", "X9")


def test_without_data_one_warning_and_the_type_ratio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRLSCHED_DATA", str(tmp_path / "nowhere"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        homo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=1)]))
        assert homo.type_speed("dssm").tolist() == [1.0]
        assert not caught  # a V100-only cluster needs no data
        topo = two_types("V100", "K80")
        for m in CATALOGUE:
            np.testing.assert_array_equal(topo.type_speed(m), topo.gpu_speed[[8, 0]])
        two_types("P100", "K80").type_speed("resnet-50")
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "simulation_throughputs.json not found" in msg and "HRLSCHED_DATA" in msg


# ----------------------------------------------------------------- backends
@pytest.mark.parametrize("backend", [AnalyticModel, OptimusModel])
def test_model_faster_on_p100_in_gavel_is_faster_on_p100_here(toy_data: Path, backend) -> None:
    topo = two_types()  # GPUs 0-7 V100, 8-15 P100
    perf = backend(topo, CATALOGUE)
    v100, p100 = Placement.of([0, 1], [0]), Placement.of([8, 9], [2])

    def speed(model: str, pl: Placement) -> float:
        return perf.alone_speed(job(0, model=model, gpus=2, batch=2 * CATALOGUE[model].default_batch), pl)

    assert speed("dssm", p100) > speed("dssm", v100)  # Recommendation: 2x on P100
    assert speed("resnet-50", p100) < speed("resnet-50", v100)  # ResNet-50: 0.5x
    assert topo.type_speed("dssm")[topo.gpu_type_names.index("P100")] == pytest.approx(2.0)


def test_async_worker_on_a_p100_outpaces_one_on_a_v100(toy_data: Path) -> None:
    topo = two_types()
    perf = OptimusModel(topo, CATALOGUE)
    j = job(0, model="dssm", gpus=1, batch=256, mode="async")
    assert perf.alone_speed(j, Placement.of([8], [2])) > perf.alone_speed(j, Placement.of([0], [0]))


def test_homogeneous_speeds_do_not_depend_on_the_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [job(k, model=m, gpus=2, batch=64) for k, m in enumerate(["dssm", "resnet-50", "wlm"])]
    pls = [Placement.of([0, 1], [0]), Placement.of([2, 3], [0]), Placement.of([4, 8], [1])]
    out = []
    for root in (tmp_path / "nowhere", gavel_file(tmp_path).parents[1]):
        monkeypatch.setenv("HRLSCHED_DATA", str(root))
        topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=2)]))
        out.append(AnalyticModel(topo, CATALOGUE).speeds(jobs, pls))
    np.testing.assert_array_equal(out[0], out[1])


def test_measured_backend_scales_compute_on_other_types(tmp_path: Path, toy_data: Path) -> None:
    from hrlsched.core import Job
    from hrlsched.perf.measured import MeasuredModel
    from tests.test_measured_backend import make_app

    make_app(tmp_path / "traces")
    cat = {**CATALOGUE, "toy": CATALOGUE["cifar10"]}
    j = Job(0, 0.0, "toy", 1e4, 8, 1, arch="allreduce")  # the initial batch: no accumulation
    g = dict(sockets=1, switches_per_socket=2, gpus_per_switch=2)
    t4 = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=2, gpu_type="T4", **g)]))
    mixed = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(name="t4", count=1, gpu_type="T4", **g),
                                                          ServerGroupSpec(name="v", count=1, gpu_type="V100", **g)]))
    base = MeasuredModel(t4, cat, traces_dir=str(tmp_path / "traces")).speeds([j], [Placement((0,))])[0]
    m = MeasuredModel(mixed, cat, traces_dir=str(tmp_path / "traces"))
    assert m.speeds([j], [Placement((0,))])[0] == base  # on the measured T4: as measured
    step, _ = m.apps["toy"].get_throughput((1,), 8.0)
    sync = 0.001
    # "toy" has no Gavel counterpart: T4 0.45 of a V100, so its compute runs 1/0.45 faster.
    want = 8 / (sync + (step - sync) * GPU_SPEED["T4"])
    assert m.speeds([j], [Placement((4,))])[0] == pytest.approx(want, rel=1e-9)


# -------------------------------------------------------------------- Gavel
def test_gavel_max_min_follows_the_per_model_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two jobs that each fill one type: with one ratio per type (no data)
    both are faster on the V100 and max-min fairness splits both types
    between them; with the per-model factors (dssm 2x on P100, resnet-50
    0.5x) each gets the whole of the type it is fast on."""
    jobs = [job(0, model="dssm", gpus=8, batch=8 * 256), job(1, model="resnet-50", gpus=8, batch=8 * 32)]
    X = {}
    for label, root in (("type ratio", tmp_path / "nowhere"), ("per model", gavel_file(tmp_path).parents[1])):
        monkeypatch.setenv("HRLSCHED_DATA", str(root))
        topo = two_types()
        g = Gavel()
        g.reset(topo, np.random.default_rng(0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            X[label] = g.allocation(make_view(topo, OptimusModel(topo, CATALOGUE), jobs))
        assert topo.gpu_type_names == ("P100", "V100")
    np.testing.assert_allclose(X["type ratio"], [[0.5, 0.5], [0.5, 0.5]], atol=1e-4)
    np.testing.assert_allclose(X["per model"], [[1.0, 0.0], [0.0, 1.0]], atol=1e-4)  # dssm -> P100


def test_bound_takes_the_models_fastest_type_first(toy_data: Path) -> None:
    from hrlsched.experiments.bound import BestRates

    topo = two_types()  # V100 first, P100 after
    rates = BestRates(AnalyticModel(topo, CATALOGUE))
    assert rates.order("resnet-50") == 0  # GPU 0 on: the V100s
    pl = rates.placement(2, 1, rates.order("dssm"))
    assert set(pl.gpus) == {8, 9} and pl.ps_sockets == (2,)
    d = job(0, model="dssm", gpus=2, batch=512, samples=1e6)
    assert rates.best(d)[0] >= AnalyticModel(topo, CATALOGUE).alone_speed(d, Placement.of([8, 9], [2])) * (1 - 1e-12)


# -------------------------------------------------------- the real data file
@pytest.mark.skipif(not (SHARED_DATA / "gavel" / "simulation_throughputs.json").exists(),
                    reason=f"public data folder {SHARED_DATA} is absent (see ../shared/data/SOURCES.md)")
def test_real_file_recommendation_is_faster_on_p100(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRLSCHED_DATA", str(SHARED_DATA))
    data = read_gavel_throughputs(SHARED_DATA / "gavel" / "simulation_throughputs.json")
    rec = ("Recommendation (batch size 512)", 1)
    assert data["p100"][rec] > data["v100"][rec]
    topo = two_types()
    perf = AnalyticModel(topo, CATALOGUE)
    d = job(0, model="dssm", gpus=1, batch=256)
    assert perf.alone_speed(d, Placement.of([8], [2])) > perf.alone_speed(d, Placement.of([0], [0]))
    ratios = gavel_ratios(SHARED_DATA / "gavel" / "simulation_throughputs.json",
                          {m: p.default_batch for m, p in CATALOGUE.items()})
    assert ratios["resnet-50"]["P100"][0] == pytest.approx(data["p100"][("ResNet-50 (batch size 32)", 1)]
                                                           / data["v100"][("ResNet-50 (batch size 32)", 1)])
    assert set(ratios) == set(GAVEL_COUNTERPART)
