"""Per-(model, GPU type) speeds (``cluster.gpu_speed``): Gavel's throughputs
file, the mapping of our models to Gavel's job types, the fallback without
data, and what the backends and Gavel's allocation make of them. Each test
writes a small file in Gavel's format and points ``HRLSCHED_DATA`` at it;
the last ones read the real file and skip without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hrlsched.cluster import ClusterSpec, ServerGroupSpec, Topology
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
