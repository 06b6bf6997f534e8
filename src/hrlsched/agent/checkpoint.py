"""Checkpoints of the agent: the weights with everything needed to use
them (the network's config, the action layout, the feature schema, the
environment settings it was trained with), and for training the optimiser,
the RNG states and the progress, so that ``--resume`` continues where a
killed run stopped.

A checkpoint is written whole (temporary file, then rename). Loading one
whose feature schema differs from this version's observations is refused
with the differences named, rather than silently feeding a network the
wrong features.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from hrlsched.agent.nets import HRLNet, NetConfig, feature_schema

FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used, with the reason."""


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


def policy_payload(net: HRLNet, part: str, env_kwargs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "net": {"net": net.cfg.to_dict(), "allocates": net.allocates, "places": net.places},
        "state_dict": {k: v.detach().clone() for k, v in net.state_dict().items()},
        "part": part, "schema": feature_schema(), "env_kwargs": dict(env_kwargs), **extra,
    }


def export_policy(src: str | Path, dst: str | Path) -> dict[str, Any]:
    """A training checkpoint without what only training needs (optimiser,
    RNG states): what ``hrl`` loads, a few hundred KB. Keeps the provenance
    (training config, iteration, env steps, held-back JCT)."""
    ck = load(src)
    keep = ("net", "state_dict", "part", "schema", "env_kwargs", "config", "iteration", "env_steps",
            "elapsed_s", "best_jct_s")
    out = {k: ck[k] for k in keep if k in ck}
    out["exported_from"] = str(src)
    save(dst, out)
    return out


def read(path: str | Path) -> dict[str, Any]:
    """Any hrlsched checkpoint (the agent's, DL2's, Harmony's), unchecked
    beyond its format; ``CheckpointError`` for a missing or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # a truncated or foreign file
        raise CheckpointError(f"{path}: not a readable hrlsched checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an hrlsched checkpoint of format {FORMAT}")
    return ck


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    ck = read(path)
    if ck.get("kind") is not None:  # DL2's or Harmony's (agent/literature.py)
        raise CheckpointError(f"{path}: a checkpoint of {ck['kind']}, not of the hrl agent")
    for key in ("net", "state_dict", "part", "schema", "env_kwargs"):
        if key not in ck:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    check_schema(path, ck["schema"])
    return ck


def check_schema(path: str | Path, schema: dict[str, list[str]]) -> None:
    now = feature_schema()
    diffs = []
    for k in sorted(set(now) | set(schema)):
        a, b = schema.get(k), now.get(k)
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


def build_net(ck: dict[str, Any]) -> HRLNet:
    cfg = ck["net"]
    net = HRLNet(NetConfig(**cfg["net"]), bool(cfg["allocates"]), bool(cfg["places"]))
    net.load_state_dict(ck["state_dict"])
    net.eval()
    return net
