"""Checkpoints of the learned schedulers (the hrl agent, DL2, Harmony): one
file format, written whole, read back with its kind and feature schema
checked.

A checkpoint is a dict saved by torch with ``format`` and, for DL2's and
Harmony's, their ``kind`` (none: the hrl agent's). It carries the weights
with everything needed to use them, and for training the optimiser, the
RNG states and the progress, so that ``--resume`` continues where a killed
run stopped.

A checkpoint is written whole (temporary file, then rename). Loading one
of another kind, or whose feature schema differs from this version's
observations, is refused with the differences named, rather than silently
feeding a network the wrong features.
"""

from __future__ import annotations

import io
import os
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hrlsched.agent.common.shipped import checkpoint_path, shipped_names
from hrlsched.errors import CheckpointError

FORMAT = 1
HRL = "hrl"  # the kind of a checkpoint that names none: the hrl agent's


def save(path: str | Path, payload: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buf)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(buf.getvalue())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: str | Path) -> dict[str, Any]:
    """Any hrlsched checkpoint (the agent's, DL2's, Harmony's), unchecked
    beyond its format; ``CheckpointError`` for a missing or foreign file."""
    path = checkpoint_path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file (or shipped checkpoint: {', '.join(shipped_names())})")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # a truncated or foreign file
        raise CheckpointError(f"{path}: not a readable hrlsched checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an hrlsched checkpoint of format {FORMAT}")
    return ck


def _named(kind: str) -> str:
    return "the hrl agent" if kind == HRL else kind


def load(path: str | Path, kind: str, schema_key: str, schema: dict[str, list[str]],
         required: Sequence[str] = ()) -> dict[str, Any]:
    """A checkpoint of ``kind`` (``hrl``, ``dl2``, ``harmony``) holding the
    entries ``required``, whose feature schema (its entry ``schema_key``)
    equals ``schema``; ``CheckpointError`` naming what differs otherwise."""
    path = Path(path)
    ck = read(path)
    have = ck.get("kind") or HRL
    if have != kind:
        raise CheckpointError(f"{path}: a checkpoint of {_named(have)}, not of {_named(kind)}")
    for key in (*required, schema_key):
        if key not in ck:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    check_schema(path, ck[schema_key], schema)
    return ck


def check_schema(path: str | Path, schema: dict[str, list[str]], now: dict[str, list[str]]) -> None:
    """``schema`` (a checkpoint's feature names per group) against ``now``
    (this version's): ``CheckpointError`` with every group that differs."""
    diffs = []
    for k in sorted(set(now) | set(schema)):
        a, b = schema.get(k), now.get(k)
        if a is not None:
            a = list(a)
        if b is not None:
            b = list(b)
        if a != b:
            if a is None or b is None:
                diffs.append(f"{k}: {'absent' if a is None else 'present'} in the checkpoint, "
                             f"{'absent' if b is None else 'present'} here")
            else:
                gone = [x for x in a if x not in b]
                new = [x for x in b if x not in a]
                diffs.append(f"{k}: checkpoint has {len(a)} features, this version {len(b)}"
                             + (f"; only in the checkpoint: {gone}" if gone else "")
                             + (f"; only here: {new}" if new else "")
                             + ("; same names in another order" if not gone and not new else ""))
    if diffs:
        raise CheckpointError(f"{path}: trained on another observation schema than this version's: "
                              + " | ".join(diffs))


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The states of a trainer's random streams (its numpy generator, torch's
    and Python's), for ``--resume``."""
    return {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state(), "python": random.getstate()}


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch"])
    if "python" in state:  # (DL2's and Harmony's checkpoints before it was kept)
        random.setstate(state["python"])


def half_state(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weights stored as float16 (the shipped checkpoints: half the bytes; a
    float32 network loads them back with an error far below its noise)."""
    return {k: v.detach().to(torch.float16).clone() for k, v in sd.items()}


def float_state(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.float() for k, v in sd.items()}
