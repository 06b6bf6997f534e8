"""Checkpoints of the hrl agent: the weights with everything needed to use
them (the network's config, the action layout, the feature schema, the
environment settings it was trained with), and for training the optimiser,
the RNG states and the progress. The file format, its atomic write and the
schema check are every learned scheduler's (``agent.common.checkpoint``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrlsched.agent.common import checkpoint as common
from hrlsched.agent.nets import HRLNet, NetConfig, feature_schema


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
    common.save(dst, out)
    return out


def load(path: str | Path) -> dict[str, Any]:
    """An hrl agent's checkpoint, its feature schema this version's
    (``CheckpointError`` naming what differs otherwise)."""
    return common.load(path, common.HRL, "schema", feature_schema(), required=("net", "state_dict", "part",
                                                                              "env_kwargs"))


def build_net(ck: dict[str, Any]) -> HRLNet:
    cfg = ck["net"]
    net = HRLNet(NetConfig(**cfg["net"]), bool(cfg["allocates"]), bool(cfg["places"]))
    net.load_state_dict(ck["state_dict"])
    net.eval()
    return net
