"""The hint: the tuned heuristic whose choice the ``hrl`` agent sees at each
decision point, and every setting of it in one frozen ``HintConfig``.

This module is the one home of those settings: their names, short names (for
``HintConfig.parse``, e.g. ``a=1.25,f=0.2,menu,first=remaining``), defaults,
docs and validation. The Optimus allocation policy, ``DecisionPoint``, the
environments, ``hrlsched train``/``tune``, the named ``optimus-tuned``
heuristic and checkpoints all take a ``HintConfig``; a checkpoint stores it
in its ``env_kwargs`` (``hint``, ``hint_options``, ``reserve_running``,
``window``, ``recheck_s``) and the two rule weights in its network state
(``gap``, ``bonus``), the format it always had, read and written only here
and in ``agent.checkpoint``.

Three groups of settings:
- the hint policy and its options (``policy``; for ``optimus``, the
  extensions of ``policies.optimus.Optimus`` beyond its paper);
- how a decision point uses it (``reserve_running``, ``window``,
  ``recheck_s``, ``batch``). Running jobs hold their room until their turn so that a
  job decided before them cannot take their GPUs and force them to restart
  (the heuristic schedulers commit the jobs they keep first); with
  ``"hint"`` only those the hint keeps as they run do (a job the hint
  changes restarts anyway, and holding its room kept earlier jobs from the
  GPUs the hint meant them to have). ``window="hint"`` decides the jobs the
  hint runs, in its priority order (``AllocationPolicy.priority``), then the
  others in arrival order, the first ``max_jobs`` of them in arrival order
  (as the hint's own allocation is placed) or in the hint's
  (``"hint-order"``). ``recheck_s`` asks for a decision point that long
  after the last, as Optimus re-allocates every ``interval_s`` (600 s);
- the two hand-set rule weights that sit beside the agent's network
  (``gap``, ``bonus``): rules, not learning, so they are reported with the
  hint, and silenced with it in the agent's ablations.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hrlsched.policies.registry import ALLOCATIONS

FIRST_ORDERS = ("arrival", "remaining")
REMAINING_FROM = ("fit", "view")
#: ``reserve_running``: its command-line words and values
RESERVE_RUNNING: dict[str, bool | str] = {"all": True, "none": False, "hint": "hint"}
WINDOWS = ("arrival", "hint", "hint-order")
BATCH_RULES = ("own", "tune", "goodput")  # ``batch``: each job's own batch size, or Pollux's (policies.goodput_batch)
TUNED = ("tune", "goodput")  # the values under which each job placed anew runs at its batch of best goodput
#: the settings that are options of the hint policy's constructor (Optimus' extensions)
POLICY_OPTIONS = ("remaining_weight", "keep_s", "keep_frac", "first_order", "observe_rounds", "remaining_from")


def _setting(default: Any, short: str, doc: str) -> Any:
    return field(default=default, metadata={"short": short, "doc": doc})


def _number(name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"hint.{name}: expected a finite number >= 0, got {v!r}")


def _choice(name: str, v: object, allowed: Sequence[object]) -> None:
    if not any(v == a and type(v) is type(a) for a in allowed):  # True is not 1, nor "hint" True
        raise ValueError(f"hint.{name}: expected one of {list(allowed)}, got {v!r}")


@dataclass(frozen=True)
class HintConfig:
    """Every setting of the hint. The defaults are the hint as its paper
    runs it (Optimus, Peng et al., EuroSys'18) with no rules beside the
    network; ``HintConfig.SHIPPED`` is the shipped agent's."""

    policy: str | None = _setting(
        "optimus", "p", "the allocation heuristic run at each decision point (a registry name; none: no hint, "
        "its features are zero)")
    remaining_weight: float = _setting(
        0.0, "a", "Optimus: each gain divided by T^a, T the job's remaining time (a=1: relative drops, closer "
        "to shortest-remaining-first; the paper: 0)")
    keep_s: float = _setting(
        0.0, "h", "Optimus: a running job grows only if that shortens its remaining time by at least h seconds")
    keep_frac: float = _setting(
        0.0, "f", "Optimus: as keep_s, the threshold a share f of the job's remaining time at its allocation")
    on_menu: bool = _setting(
        False, "menu", "Optimus: a job's workers step along the agent's menu of worker counts, so the hint's "
        "choice is a menu slot")
    first_order: str = _setting(
        "arrival", "first", "Optimus: the order of each job's first worker: arrival, or remaining (shortest "
        "predicted remaining time at one worker first)")
    observe_rounds: bool = _setting(
        False, "obs", "Optimus: a job's loss observed once per round it ran since the last call (a caller asked "
        "only at events would otherwise fit few points)")
    remaining_from: str = _setting(
        "fit", "rem", "Optimus: remaining steps from the paper's loss-curve fit, or from the view (the "
        "scenario's predictor: exact unless predictor.work_noise is set, so 'view' reads an oracle by default)")
    reserve_running: bool | str = _setting(
        True, "r", "decision point: running jobs hold their room until their turn (all), not at all (none), "
        "or only those the hint keeps as they run (hint)")
    window: str = _setting(
        "arrival", "win", "decision point: which max_jobs jobs a point decides: the first in arrival order, or "
        "the hint's (hint: decided in arrival order; hint-order: in the hint's order)")
    recheck_s: float | None = _setting(
        None, "re", "decision point: also asked this many seconds after the last decision (Optimus re-allocates "
        "every 600 s); none: at arrivals and completions only")
    batch: str = _setting(
        "own", "batch", "decision point: each job's batch size: its own (as submitted); tune: decided as if at "
        "its own, then each job placed anew given the batch of best goodput at its allocation, and a kept job where "
        "that pays for its restart; goodput: the same, with the hint's worker counts priced at their batch of best "
        "goodput (Pollux's, policies.goodput_batch; only where the performance model has gradient statistics: pollux-w*)")
    gap: float = _setting(
        0.0, "g", "rule beside the network: weight (in units of agent.rules.GAP_SCALE, 10) on the speed gap of each "
        "candidate to the fastest architecture and mode at the hint's worker count")
    bonus: float | None = _setting(
        None, "b", "rule beside the network: a weight added to the score of the hint's slot (none: no such "
        "parameter)")

    def __post_init__(self) -> None:
        if self.policy is not None and (not isinstance(self.policy, str) or not self.policy):
            raise ValueError(f"hint.policy: expected an allocation policy's name or none, got {self.policy!r}")
        for name in ("remaining_weight", "keep_s", "keep_frac"):
            _number(name, getattr(self, name))
        for name in ("on_menu", "observe_rounds"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"hint.{name}: expected true or false, got {getattr(self, name)!r}")
        _choice("first_order", self.first_order, FIRST_ORDERS)
        _choice("remaining_from", self.remaining_from, REMAINING_FROM)
        _choice("reserve_running", self.reserve_running, list(RESERVE_RUNNING.values()))
        _choice("window", self.window, WINDOWS)
        _choice("batch", self.batch, BATCH_RULES)
        if self.window != "arrival" and self.policy is None:
            raise ValueError(f"hint.window: {self.window!r} orders jobs by the hint, but hint.policy is none")
        if self.recheck_s is not None and (isinstance(self.recheck_s, bool) or not isinstance(
                self.recheck_s, (int, float)) or not (self.recheck_s > 0 and math.isfinite(self.recheck_s))):
            raise ValueError(f"hint.recheck_s: expected a positive number of seconds or none, got {self.recheck_s!r}")
        if isinstance(self.gap, bool) or not isinstance(self.gap, (int, float)) or not math.isfinite(self.gap):
            raise ValueError(f"hint.gap: expected a finite number, got {self.gap!r}")
        if self.bonus is not None and (isinstance(self.bonus, bool) or not isinstance(self.bonus, (int, float))
                                       or not math.isfinite(self.bonus)):
            raise ValueError(f"hint.bonus: expected a finite number or none, got {self.bonus!r}")
        if self.policy is None and self.policy_options(()):
            raise ValueError("hint: options of the hint policy set without a hint policy")
        # numbers as floats, so that equal settings compare and print equal
        for name in ("remaining_weight", "keep_s", "keep_frac", "gap"):
            object.__setattr__(self, name, float(getattr(self, name)))
        for name in ("recheck_s", "bonus"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))

    # ------------------------------------------------------------ the policy
    def policy_options(self, worker_options: Sequence[int]) -> dict[str, Any]:
        """The hint policy's constructor arguments: none where every option
        is at its default (the hint as its paper runs it), else
        ``remaining_weight`` and ``keep_s`` and each other option that is
        set (``worker_counts``: the menu ``worker_options`` with
        ``on_menu``). The same dict checkpoints store as ``hint_options``."""
        d = HintConfig()
        if all(getattr(self, k) == getattr(d, k) for k in (*POLICY_OPTIONS, "on_menu")):
            return {}
        opts: dict[str, Any] = {"remaining_weight": self.remaining_weight, "keep_s": self.keep_s}
        for k in POLICY_OPTIONS[2:]:
            if getattr(self, k) != getattr(d, k):
                opts[k] = getattr(self, k)
        if self.on_menu:
            opts["worker_counts"] = [int(w) for w in worker_options]
        return opts

    def make_policy(self, worker_options: Sequence[int]) -> Any:
        """A fresh hint policy (an ``AllocationPolicy``), None without one."""
        if self.policy is None:
            return None
        if self.policy not in ALLOCATIONS:
            raise ValueError(f"hint.policy: unknown allocation policy {self.policy!r}; expected one of "
                             f"{sorted(ALLOCATIONS)} or none")
        factory = ALLOCATIONS[self.policy].factory
        opts = self.policy_options(worker_options)
        if not opts:  # the policy as its paper runs it
            return factory()
        try:
            return factory(tuning=self, worker_counts=opts.get("worker_counts"))
        except TypeError:
            raise ValueError(f"hint: the hint policy {self.policy!r} takes no options {sorted(opts)} (only "
                             "optimus does)") from None

    # ------------------------------------------------------------ checkpoints' env_kwargs
    def env_kwargs(self, worker_options: Sequence[int]) -> dict[str, Any]:
        """The hint's entries of a checkpoint's ``env_kwargs`` (defaults not
        written, as checkpoints always stored them)."""
        kw: dict[str, Any] = {}
        if self.policy is not None:
            kw["hint"] = self.policy
        opts = self.policy_options(worker_options)
        if opts:
            kw["hint_options"] = opts
        if self.reserve_running is not True:
            kw["reserve_running"] = self.reserve_running
        if self.window != "arrival":
            kw["window"] = self.window
        if self.recheck_s is not None:
            kw["recheck_s"] = self.recheck_s
        if self.batch != "own":
            kw["batch"] = self.batch
        return kw

    @classmethod
    def from_env_kwargs(cls, kw: Mapping[str, Any], gap: float = 0.0, bonus: float | None = None,
                        where: str = "env_kwargs") -> HintConfig:
        """The hint of a checkpoint's ``env_kwargs`` (``where`` names it in
        errors) and its network's rule weights."""
        opts = dict(kw.get("hint_options") or {})
        counts = opts.pop("worker_counts", None)
        menu = kw.get("worker_options")
        if counts is not None and menu is not None and [int(c) for c in counts] != [int(w) for w in menu]:
            raise ValueError(f"{where}.hint_options.worker_counts: expected the agent's menu {list(menu)}, "
                             f"got {list(counts)}")
        unknown = sorted(set(opts) - set(POLICY_OPTIONS))
        if unknown:
            raise ValueError(f"{where}.hint_options: unknown options {unknown}; expected some of "
                             f"{list(POLICY_OPTIONS)}")
        try:
            return cls(policy=kw.get("hint"), **opts, on_menu=counts is not None,
                       reserve_running=kw.get("reserve_running", True), window=kw.get("window", "arrival"),
                       recheck_s=kw.get("recheck_s"), batch=kw.get("batch", "own"), gap=gap, bonus=bonus)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None

    # ------------------------------------------------------------ text
    @staticmethod
    def settings() -> list[dataclasses.Field]:
        return list(dataclasses.fields(HintConfig))

    @classmethod
    def parse(cls, text: str, base: HintConfig | None = None) -> HintConfig:
        """``base`` (default: the defaults) with the settings of ``text``:
        comma-separated ``short=value`` or ``name=value`` (``none`` for an
        empty optional); a flag (``menu``, ``obs``) alone means true;
        ``r`` takes all, none or hint."""
        by_key = {}
        for f in cls.settings():
            by_key[f.name] = by_key[f.metadata["short"]] = f
        changes: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, eq, value = part.partition("=")
            f = by_key.get(key.strip())
            if f is None:
                keys = ", ".join(f"{g.metadata['short']} ({g.name})" for g in cls.settings())
                raise ValueError(f"hint {text!r}: unknown setting {key!r}; expected one of {keys}")
            value = value.strip()
            changes[f.name] = _value(f, value if eq else None, text)
        base = base or cls()
        return dataclasses.replace(base, **changes)

    def text(self) -> str:
        """The settings that differ from the defaults, as ``parse`` reads them."""
        d = HintConfig()
        parts = []
        for f in self.settings():
            v = getattr(self, f.name)
            if v == getattr(d, f.name) and type(v) is type(getattr(d, f.name)):
                continue
            short = f.metadata["short"]
            if isinstance(v, bool) and f.name != "reserve_running":
                parts.append(short if v else f"{short}=false")
            elif f.name == "reserve_running":
                parts.append(f"{short}={next(k for k, x in RESERVE_RUNNING.items() if x == v and type(x) is type(v))}")
            else:
                parts.append(f"{short}={'none' if v is None else (f'{v:g}' if isinstance(v, float) else v)}")
        return ",".join(parts)

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        """(name, short name, value, default, doc) per setting."""
        d = HintConfig()
        return [(f.name, f.metadata["short"], repr(getattr(self, f.name)), repr(getattr(d, f.name)),
                 f.metadata["doc"]) for f in self.settings()]


def _value(f: dataclasses.Field, value: str | None, text: str) -> Any:
    """One setting's value from its text (None: the key alone, a flag)."""
    name = f.name
    try:
        if name in ("on_menu", "observe_rounds"):
            if value is None or value.lower() in ("true", "1", "yes"):
                return True
            if value.lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if value is None:
            raise ValueError
        if name == "reserve_running":
            return RESERVE_RUNNING[value]
        if value.lower() == "none" and name in ("policy", "recheck_s", "bonus"):
            return None
        if name in ("policy", "first_order", "remaining_from", "window", "batch"):
            return value
        return float(value)
    except (ValueError, KeyError):
        expected = {"reserve_running": "all, none or hint", "on_menu": "nothing, true or false",
                    "observe_rounds": "nothing, true or false"}.get(name, "a value")
        raise ValueError(f"hint {text!r}: {f.metadata['short']} ({name}): expected {expected}, got "
                         f"{value!r}") from None


#: the shipped agent's hint (``src/hrlsched/agent/checkpoints/hrl-default.pt``; a test checks they agree)
SHIPPED = HintConfig(remaining_weight=1.25, keep_frac=0.2, on_menu=True, first_order="remaining",
                     remaining_from="view", reserve_running="hint", window="hint", recheck_s=600.0, batch="goodput",
                     gap=8.0, bonus=1.0)
