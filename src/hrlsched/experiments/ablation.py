"""The agent's rules without what it learned, built from its own
checkpoint: the baselines that say what the network adds.

A level-1 checkpoint with a hint (as the shipped one) scores each
allocation slot as (``agent.nets.HRLNet.heads``)

    learned candidate scorer  +  gap x (speed gap to the hint's slot, at the hint's worker count)
                              +  bonus x (the slot is the hint's)

- **rules-only**: the learned scorer silenced (its last layer,
  ``cand.2.weight`` and ``cand.2.bias``, zeroed, and its residual over
  the rules, ``agent.residual``, and its point selector,
  ``agent.selector``, and its placement choice, ``agent.placement_choice``,
  removed: pack places), the hand-set ``gap`` and
  ``bonus`` kept: the hint's slot, or at its worker count another
  architecture, mode or PS count predicted to progress faster;
- **hint alone**: ``gap`` zeroed too: the hint's slot at every choice, i.e.
  the hint heuristic with the checkpoint's hint options and placement (the
  same runs as ``ComposedScheduler(optimus(**hint_options), pack)``, to
  float rounding). Its ``bonus`` is set to 1 rather than zeroed: with every
  other score zero, a positive weight on the hint's slot is what makes it
  the one maximum (all zero, the first valid slot, *wait*, would win).

Each is written next to the runs that use it, named by the source file's
content (a changed checkpoint gives new files, hence new runs)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from pathlib import Path
from typing import Any

SCORER = ("cand.2.weight", "cand.2.bias")  # the last layer of the learned candidate scorer
GAP, BONUS = "gap", "bonus"
RULES_ONLY, HINT_ALONE = "rules-only", "hint-alone"
PLACEMENTS = ("pack", "balance", "topology", "migrate")  # the placement heuristics the rules are placed by (``placed_rules``)
LEARNED_PLACEMENT = "rules+learned"


class AblationError(ValueError):
    """A checkpoint that these ablations cannot be built from, with the reason."""


def rules_placement(ck: dict[str, Any]) -> str:
    """The placement a checkpoint's rules place by (``pack`` unless it names another)."""
    return str(ck.get("env_kwargs", {}).get("placement", "pack"))


def rules_heuristic(ck: dict[str, Any]) -> str:
    """The heuristic a checkpoint's rules-only ablation decides as, to the
    bit (``optimus-tuned``, or ``optimus-tuned+migrate``)."""
    from hrlsched.agent.rules import rules_name

    return rules_name(rules_placement(ck))


def rules_only(ck: dict[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """``ck`` (a loaded agent checkpoint) with its learned candidate scorer silenced."""
    import torch

    sd = ck["state_dict"]
    missing = [k for k in SCORER if k not in sd]
    if missing:
        raise AblationError(f"{source}: no learned candidate scorer to silence (state_dict lacks "
                            f"{', '.join(missing)}; expected a network that allocates, as hrl-default.pt)")
    if not ck["env_kwargs"].get("hint"):
        raise AblationError(f"{source}: trained without a hint (env_kwargs has no 'hint'): it has no rules "
                            "to keep once its scorer is silenced")
    out = copy.copy(ck)
    out["state_dict"] = {**sd, **{k: torch.zeros_like(sd[k]) for k in SCORER}}
    out.pop("residual", None)  # the learned residual over the rules (agent.residual) goes too,
    out.pop("selector", None)  # and the learned point selector (agent.selector)
    out.pop("placement", None)  # and the learned placement choice (agent.placement_choice): pack places
    out["ablation"] = RULES_ONLY
    return out


def hint_alone(ck: dict[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """``ck`` playing its hint's slot at every choice (see the module's docstring)."""
    import torch

    out = rules_only(ck, source)
    sd = dict(out["state_dict"])
    if GAP in sd:
        sd[GAP] = torch.zeros_like(sd[GAP])
    sd[BONUS] = torch.ones(())
    net = copy.deepcopy(out["net"])
    net["net"]["hint_bonus"] = True  # a network without the weight gets it
    out.update(state_dict=sd, net=net, ablation=HINT_ALONE)
    return out


def describe_hint(ck: dict[str, Any]) -> str:
    """The hint heuristic that ``hint_alone`` plays, e.g. ``optimus(a=1.25,f=0.2,...)+pack``
    (its settings as ``HintConfig.text`` prints them, the rule weights left out)."""
    from hrlsched.experiments import learned

    hint = dataclasses.replace(learned.hint_of(ck), gap=0.0, bonus=None)
    return f"{hint.policy}({dataclasses.replace(hint, policy='optimus').text()})+{ck['env_kwargs'].get('placement', 'pack')}"


def source_tag(path: Path) -> str:
    """The first 12 hex digits of the file's SHA-256."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def ablated_checkpoints(checkpoint: Path, folder: Path) -> dict[str, Path]:
    """Write (once) the rules-only and hint-alone checkpoints of
    ``checkpoint`` into ``folder``; their paths by label."""
    from hrlsched.experiments import learned

    ck = learned.load(checkpoint)
    tag = source_tag(checkpoint)
    out = {}
    for label, make in ((RULES_ONLY, rules_only), (HINT_ALONE, hint_alone)):
        path = folder / f"{label}-{tag}.pt"
        if not path.is_file():
            learned.save(path, {**make(ck, str(checkpoint)), "ablated_from": str(checkpoint)})
        out[label] = path
    return out


def placed_rules(checkpoint: Path, folder: Path) -> tuple[dict[str, Path], bool]:
    """Write (once) into ``folder`` the checkpoint's rules (``rules_only``)
    placed by each heuristic of ``PLACEMENTS`` but its own (the rules-only
    ablation itself is the rules placed so: ``pack``, or ``migrate``) and, where the checkpoint
    has a learned placement choice (``agent.placement_choice``), by that
    choice (``rules+learned``): the same allocation policy, placed each way
    (level 2 compared alone). Returns their paths by label, and whether the
    checkpoint is itself its rules with its placement choice (nothing else
    learned: ``rules+learned`` is then the agent, not written)."""
    from hrlsched.experiments import learned

    ck = learned.load(checkpoint)
    rules = rules_only(ck, str(checkpoint))
    own = rules_placement(rules)  # the rules-only ablation itself
    made = {f"rules+{p}": {**rules, "env_kwargs": {**rules["env_kwargs"], "placement": p}}
            for p in PLACEMENTS if p != own}
    is_learned = False
    if ck.get("placement") is not None:
        mine = {**rules, "placement": ck["placement"]}
        is_learned = decision_tag(mine) == decision_tag(ck)
        if not is_learned:
            made[LEARNED_PLACEMENT] = mine
    out = {}
    for label, c in made.items():
        # named by what decides (two checkpoints with the same rules share these runs)
        path = folder / f"{label}-{decision_tag(c)}.pt"
        if not path.is_file():
            learned.save(path, {**c, "ablation": label, "ablated_from": str(checkpoint)})
        out[label] = path
    return out, is_learned


def decision_tag(ck: dict[str, Any]) -> str:
    """The first 12 hex digits of a SHA-256 of what an agent's decisions
    depend on in a loaded checkpoint (its network, weights, schema,
    environment settings and learned parts), not of its provenance."""
    import json

    h = hashlib.sha256()
    for k in ("net", "part", "schema", "env_kwargs", "residual", "selector", "placement"):
        h.update(json.dumps([k, ck.get(k)], sort_keys=True, default=str).encode())
    for k, v in sorted(ck["state_dict"].items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]
