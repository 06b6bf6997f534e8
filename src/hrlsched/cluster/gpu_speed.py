"""Relative training speed of each model on each GPU type: the one function
(``model_speed``) that the performance backends read, and through them every
policy that reasons about GPU types (Gavel's throughput matrix, AlloX's
processing times, Gandiva-fair's speed-ups are the predictor's speeds).

``model_speed(model, gpu_type)`` is the model's throughput on one GPU of that
type over its throughput on one V100, the reference type (the catalogue's
theta are times on the DL2 testbed's GPUs, taken as V100 = 1.0). It is, in
this order:

1. the cluster spec's ``gpu_speed`` entry for the type, when it has one (an
   operator's own figure, for every model);
2. 1.0 on the reference type;
3. on a GPU type that Gavel measured (K80, P100, V100), for a model with a
   counterpart among Gavel's job types (``GAVEL_COUNTERPART``): the ratio of
   the counterpart's isolated single-GPU throughputs, type over V100, in
   Gavel's ``simulation_throughputs.json`` (stanford-futuredata/gavel @
   c4fa400, ``scheduler/``; ``gavel/simulation_throughputs.json`` in the data
   folder, ``$HRLSCHED_DATA`` or ``../shared/data``), at the Gavel batch size
   nearest the model's ``default_batch`` (per GPU; nearest in ratio, the
   smaller on a tie) among those measured on the three types;
4. otherwise the type's documented ratio, ``GPU_SPEED`` (``cluster.spec``),
   the same for every model.

Where the data file is absent, 3 falls back to 4 with one warning (tests and
CI run without the data folder); a malformed file is refused with an error
that names the file and the key. Only the scale-factor-1, isolated figures
(``"null"``) are read: multi-GPU rows include Gavel's communication, which
the backends model themselves.

``python -m hrlsched.cluster.gpu_speed`` prints the mapping table of
docs/perf-model.md from the data folder.
"""

from __future__ import annotations

import ast
import json
import math
import warnings
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from hrlsched.cluster.spec import GPU_SPEED

REFERENCE_TYPE = "V100"
GAVEL_FILE = Path("gavel") / "simulation_throughputs.json"
# Our GPU type names -> the worker types of Gavel's file.
GAVEL_TYPES: dict[str, str] = {"K80": "k80", "P100": "p100", "V100": "v100"}

# Catalogue model -> (Gavel job type, why it is the counterpart). Gavel's job
# types: ResNet-18 (CIFAR-10), ResNet-50 (ImageNet), Transformer (Multi30k
# translation), LM (LSTM language model, Wikitext-2), Recommendation
# (autoencoder, ML-20M), A3C (Pong), CycleGAN (monet2photo). Models not here
# (cnn-text-classification, deepspeech2, yolov3) take GPU_SPEED.
GAVEL_COUNTERPART: dict[str, tuple[str, str]] = {
    # DL2 models
    "resnet-50": ("ResNet-50", "the same network on ImageNet"),
    "vgg-16": ("ResNet-50", "ImageNet CNN (Gavel has no VGG)"),
    "inception-bn": ("ResNet-50", "ImageNet CNN (Gavel has no Inception)"),
    "resnext-110": ("ResNet-18", "CIFAR-10 residual network"),
    "seq2seq": ("Transformer", "sequence-to-sequence translation"),
    "wlm": ("LM", "word-level LSTM language model"),
    "dssm": ("Recommendation", "fully connected network on sparse inputs (Gavel: recommendation autoencoder)"),
    # Pollux applications
    "imagenet": ("ResNet-50", "the same network on ImageNet"),
    "cifar10": ("ResNet-18", "the same network on CIFAR-10"),
    "ncf": ("Recommendation", "recommendation on MovieLens"),
    "bert": ("Transformer", "Transformer encoder"),
}


class GavelFormatError(ValueError):
    """Gavel's throughputs file is malformed; the message names the file and the key."""


def read_gavel_throughputs(path: str | Path) -> dict[str, dict[tuple[str, int], float]]:
    """``{worker type: {(job type, scale factor): isolated steps/s}}`` of a
    Gavel ``simulation_throughputs.json`` (every worker type, the
    ``*_unconsolidated`` ones included). The file maps each worker type to
    ``{"('<job type>', <scale factor>)": {"null": steps/s alone, "<other key>":
    [steps/s of both when co-located], ...}}``; the co-located lists are not
    read."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file (Gavel simulation_throughputs.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GavelFormatError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict) or not data:
        raise GavelFormatError(f"{path}: expected an object of worker types (e.g. 'v100'), got {type(data).__name__}")
    out: dict[str, dict[tuple[str, int], float]] = {}
    for wt, rows in data.items():
        if not isinstance(rows, dict):
            raise GavelFormatError(f"{path}: key {wt!r}: expected an object of job types, got {type(rows).__name__}")
        table = out[wt] = {}
        for key, val in rows.items():
            where = f"{path}: key {wt!r} -> {key!r}"
            try:
                name, scale = ast.literal_eval(key)
                if not isinstance(name, str) or not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
                    raise ValueError
            except (ValueError, SyntaxError, TypeError):
                raise GavelFormatError(f"{where}: expected a key \"('<job type>', <scale factor >= 1>)\"") from None
            iso = val.get("null") if isinstance(val, dict) else None
            if isinstance(iso, bool) or not isinstance(iso, (int, float)) or not math.isfinite(iso) or iso < 0:
                raise GavelFormatError(f"{where}: expected an object whose 'null' is the isolated throughput "
                                       f"(steps/s, a number >= 0), got {iso if isinstance(val, dict) else val!r}")
            table[(name, scale)] = float(iso)
    return out


def _batch(job_type: str) -> tuple[str, int | None]:
    """'ResNet-50 (batch size 32)' -> ('ResNet-50', 32); 'A3C' -> ('A3C', None)."""
    head, sep, tail = job_type.partition(" (batch size ")
    if sep and tail.endswith(")") and tail[:-1].isdigit():
        return head, int(tail[:-1])
    return job_type, None


def nearest_batch(batches: list[int], batch: int) -> int:
    """The batch nearest ``batch`` in ratio; the smaller on a tie."""
    return min(sorted(batches), key=lambda b: abs(math.log(b / batch)))


def gavel_ratios(path: str | Path, models: Mapping[str, int]) -> dict[str, dict[str, tuple[float, str]]]:
    """``{model: {GPU type: (speed / V100, Gavel job type used)}}`` for the
    models (name -> default batch per GPU) that have a counterpart; types and
    models the file lacks are left out."""
    data = read_gavel_throughputs(path)
    iso: dict[str, dict[tuple[str, int | None], float]] = {}
    for ours, wt in GAVEL_TYPES.items():
        for (job_type, scale), v in data.get(wt, {}).items():
            if scale == 1:
                iso.setdefault(ours, {})[_batch(job_type)] = v
    ref = iso.get(REFERENCE_TYPE, {})
    out: dict[str, dict[str, tuple[float, str]]] = {}
    for model, (family, _why) in GAVEL_COUNTERPART.items():
        if model not in models:
            continue
        # One batch per model: among those measured (> 0) on every Gavel type of the file.
        keys = [k for k in ref if k[0] == family and all(t.get(k, 0.0) > 0 for t in iso.values())]
        if not keys:
            continue
        sized = [k[1] for k in keys if k[1] is not None]
        key = (family, nearest_batch(sized, models[model])) if sized else keys[0]
        label = family if key[1] is None else f"{family} (batch size {key[1]})"
        out[model] = {ty: (1.0 if ty == REFERENCE_TYPE else table[key] / ref[key], label)
                      for ty, table in iso.items()}
    return out


def gavel_path() -> Path:
    from hrlsched.data import data_dir

    return data_dir() / GAVEL_FILE


@lru_cache(maxsize=8)
def _ratios_at(path: str) -> dict[str, dict[str, tuple[float, str]]] | None:
    if not Path(path).is_file():
        return None
    from hrlsched.core.catalogue import CATALOGUE

    return gavel_ratios(path, {m: p.default_batch for m, p in CATALOGUE.items()})


_warned: set[str] = set()


def model_speed(model: str, gpu_type: str, overrides: Mapping[str, float] | None = None) -> float:
    """Throughput of ``model`` on one GPU of ``gpu_type`` relative to one V100
    (the rules in the module docstring)."""
    if overrides and gpu_type in overrides:
        return float(overrides[gpu_type])
    if gpu_type == REFERENCE_TYPE:
        return 1.0
    if gpu_type in GAVEL_TYPES and model in GAVEL_COUNTERPART:
        path = gavel_path()
        ratios = _ratios_at(str(path))
        if ratios is None:
            if str(path) not in _warned:
                _warned.add(str(path))
                warnings.warn(
                    f"{path} not found: per-model GPU speeds fall back to one ratio per GPU type "
                    f"(cluster.spec.GPU_SPEED, e.g. {gpu_type} {GPU_SPEED[gpu_type]}) for every model; set "
                    "HRLSCHED_DATA to the data folder for Gavel's per-model throughputs",
                    UserWarning, stacklevel=2,
                )
        elif gpu_type in ratios.get(model, {}):
            return ratios[model][gpu_type][0]
    try:
        return GPU_SPEED[gpu_type]
    except KeyError:
        raise KeyError(f"GPU type {gpu_type!r}: no speed ratio; expected one of {sorted(GPU_SPEED)} or an "
                       "entry in the cluster spec's gpu_speed") from None


def mapping_table(path: str | Path | None = None) -> str:
    """The markdown table of docs/perf-model.md: every catalogue model, its
    Gavel counterpart and its speed on each Gavel type (or the fallback)."""
    from hrlsched.core.catalogue import CATALOGUE, DL2_MODELS, POLLUX_CATALOGUE

    path = Path(path) if path is not None else gavel_path()
    ratios = gavel_ratios(path, {m: p.default_batch for m, p in CATALOGUE.items()})
    types = [t for t in GAVEL_TYPES if t != REFERENCE_TYPE]
    lines = ["| model | batch per GPU | Gavel job type | why | " + " | ".join(f"{t} / V100" for t in types) + " |",
             "|---|---|---|---|" + "---|" * len(types)]
    for model in [*DL2_MODELS, *sorted(POLLUX_CATALOGUE)]:
        row = ratios.get(model)
        if row is None:
            cells = [f"{GPU_SPEED[t]:.2f} (GPU_SPEED)" for t in types]
            lines.append(f"| {model} | {CATALOGUE[model].default_batch} | none | - | " + " | ".join(cells) + " |")
            continue
        label = row[REFERENCE_TYPE][1]
        cells = [f"{row[t][0]:.3f}" if t in row else f"{GPU_SPEED[t]:.2f} (GPU_SPEED)" for t in types]
        lines.append(f"| {model} | {CATALOGUE[model].default_batch} | {label} | {GAVEL_COUNTERPART[model][1]} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(mapping_table(sys.argv[1] if len(sys.argv) > 1 else None))
