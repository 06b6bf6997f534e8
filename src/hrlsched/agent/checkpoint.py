"""Checkpoints of the hrl agent: the weights with everything needed to use
them (the network's config, the action layout, the feature schema, the
environment settings it was trained with), and for training the optimiser,
the RNG states and the progress. The file format, its atomic write and the
schema check are every learned scheduler's (``agent.common.checkpoint``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hrlsched.agent.common import checkpoint as common
from hrlsched.agent.nets import HRLNet, NetConfig, feature_schema
from hrlsched.envs.candidates import WORKER_OPTIONS
from hrlsched.errors import CheckpointError
from hrlsched.policies.hint import HintConfig


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


#: the entries of a checkpoint's ``env_kwargs`` that hold its hint (``HintConfig.env_kwargs``)
HINT_KEYS = ("hint", "hint_options", "reserve_running", "window", "recheck_s", "batch")


def hint_of(ck: dict[str, Any]) -> HintConfig:
    """The hint of an hrl checkpoint: its ``env_kwargs``' hint entries and
    its network's two rule weights (``gap``, ``bonus``)."""
    net, state = ck["net"]["net"], ck["state_dict"]
    gap = float(state["gap"]) if net.get("hint_gap") else 0.0
    bonus = float(state["bonus"]) if net.get("hint_bonus") else None
    try:
        return HintConfig.from_env_kwargs(ck["env_kwargs"], gap, bonus)
    except ValueError as e:
        raise CheckpointError(f"checkpoint: {e}") from None


def with_hint(ck: dict[str, Any], hint: HintConfig) -> dict[str, Any]:
    """A copy of a level-1 checkpoint (without what only training needs)
    whose hint is ``hint``: its ``env_kwargs``' hint entries and its
    network's rule weights, the rest of the network unchanged."""
    if ck.get("part") != "allocate":
        raise CheckpointError(f"hint: expected a level-1 checkpoint (part 'allocate'), got {ck.get('part')!r}")
    if hint.policy is None:
        raise CheckpointError("hint: the rule weights compare with the hint's choice; expected a hint policy "
                              "(e.g. p=optimus)")
    menu = ck["env_kwargs"].get("worker_options", WORKER_OPTIONS)
    try:
        hint.make_policy(menu)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    net = dict(ck["net"])
    net["net"] = {**net["net"], "hint_gap": True, "hint_bonus": hint.bonus is not None}
    state = dict(ck["state_dict"])
    state["gap"] = torch.tensor(hint.gap)
    state.pop("bonus", None)
    if hint.bonus is not None:
        state["bonus"] = torch.tensor(hint.bonus)
    kw = {k: v for k, v in ck["env_kwargs"].items() if k not in HINT_KEYS[1:]}  # "hint" keeps its place
    kw.update(hint.env_kwargs(menu))
    # (``hint_gap_weight``: older files' copy of ``gap``, one home now)
    keep = {k: v for k, v in ck.items() if k not in ("optimizer", "rng", "hint_gap_weight")}
    return {**keep, "net": net, "state_dict": state, "env_kwargs": kw}


def env_args(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``env_kwargs`` as the environments' keyword arguments:
    its hint entries as one ``HintConfig`` (the rule weights, which the
    network holds, left at their defaults)."""
    kw = {k: v for k, v in env_kwargs.items() if k not in HINT_KEYS}
    if any(k in env_kwargs for k in HINT_KEYS):  # (a point's settings may come without a hint policy)
        try:
            kw["hint"] = HintConfig.from_env_kwargs(env_kwargs)
        except ValueError as e:
            raise CheckpointError(f"env_kwargs: {e}") from None
    return kw
