"""``hrlsched tune``: policy search over the agent's hint-gap weight and its
hint's two parameters.

A cloned level-1 agent takes its hint's slot; the shared scorer reads the
candidate rows one by one, so it cannot see that another architecture or
mode at the hint's worker count would progress faster (the heuristics keep
the workload's default for jobs that leave them open). ``NetConfig.hint_gap``
adds one weight on that gap (``nets.hint_speed_gap``). The hint itself
(``optimus``) has two parameters that the paper fixes at 0
(``Optimus.remaining_weight``: gains relative to the job's remaining time;
``Optimus.keep_s``: the least drop of its remaining time for which a running
job grows). PPO moves a single weight by about its learning rate per update,
far too slowly for a weight whose useful values are of order one or more;
its per-choice credit is drowned in the thousands of choices of an episode;
and the hint's parameters are not weights of the network at all. A
whole-episode search over a few values is cheap and exact instead: the
simulation is deterministic, so every point of the grid meets the same
training workloads (common random numbers), every episode as ``hrl`` would
run it.

Procedure: the checkpoint ``--checkpoint`` (its other weights unchanged) at
each point of the grid (gap weights in units of ``nets.GAP_SCALE``, times
remaining weights, times keep thresholds) on the training seeds (>= 1000);
the point of the lowest mean average JCT is then run on the held-back seeds
(100-104) beside ``ORIGIN`` (the checkpoint as cloned, its hint the paper's
``optimus``), and written as ``OUT/best-policy.pt`` (what ``--policy hrl
--checkpoint`` loads) with ``OUT/summary.json`` (the figures, and the wall
time spent). Every episode's result is appended to ``OUT/search.csv`` as it
finishes, so ``--resume`` (the same command again) runs only what is
missing.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.common.checkpoint import CheckpointError, save
from hrlsched.agent.common.seeds import DEFAULT_VALID_SEEDS, check_seeds
from hrlsched.agent.common.training_run import write_config

FIELDS = ["phase", "weight", "remaining_weight", "keep_s", "seed", "avg_jct_s", "restarts"]

#: a point of the search: (hint-gap weight, the hint's remaining_weight, its keep_s)
Point = tuple[float, float, float]
ORIGIN: Point = (0.0, 0.0, 0.0)


def label(point: Point) -> str:
    """``3`` for a gap weight alone (as the first searches wrote it), else
    ``3/a1/h1000`` (gap weight, remaining weight, keep threshold)."""
    g, a, h = point
    return f"{g:g}" if not (a or h) else f"{g:g}/a{a:g}/h{h:g}"


# The settings of a search that hold at every point but ``ORIGIN`` (``with_weight``'s keywords, its
# ``on_menu`` named ``hint_on_menu``):
# saved in config.yaml and summary.json, and checked against a search resumed in the same folder.
HINT_SETTINGS = ("hint_on_menu", "keep_frac", "reserve_running", "first_order", "window", "recheck_s",
                 "observe_rounds", "remaining_from", "bonus")


@dataclass
class TuneConfig:
    checkpoint: str
    scenario: str = "default"
    overrides: list[str] = field(default_factory=list)
    grid: list[float] = field(default_factory=lambda: [0.0, 1.0, 2.0, 3.0, 5.0, 10.0])
    remaining_weights: list[float] = field(default_factory=lambda: [0.0])
    keep_s: list[float] = field(default_factory=lambda: [0.0])
    # the hint's worker counts limited to the agent's menu (Optimus.worker_counts) at every point but ORIGIN
    hint_on_menu: bool = False
    # at every point but ORIGIN too: the hint's keep threshold as a share of the job's remaining time
    # (Optimus.keep_frac), and which running jobs hold their room (DecisionPoint's reserve_running)
    keep_frac: float = 0.0
    reserve_running: bool | str = True
    first_order: str = "arrival"  # Optimus.first_order of the hint, at every point but ORIGIN
    observe_rounds: bool = False  # Optimus.observe_rounds of the hint, at every point but ORIGIN
    remaining_from: str = "fit"  # Optimus.remaining_from of the hint, at every point but ORIGIN
    window: str = "arrival"  # DecisionPoint's window (the jobs a point decides), at every point but ORIGIN
    recheck_s: float | None = None  # DecisionPoint's recheck_s (a point this long after the last), but at ORIGIN
    bonus: float | None = None  # the network's weight on the hint slot (NetConfig.hint_bonus), but at ORIGIN
    train_seeds: list[int] = field(default_factory=lambda: list(range(1000, 1010)))
    valid_seeds: list[int] = field(default_factory=lambda: list(DEFAULT_VALID_SEEDS))
    workers: int = 2

    def validate(self) -> None:
        check_seeds(self.train_seeds, self.valid_seeds)
        for name, values in (("grid", self.grid), ("remaining_weights", self.remaining_weights),
                             ("keep_s", self.keep_s)):
            if not values:
                raise ValueError(f"{name}: expected at least one value")
            if name != "grid" and any(not (v >= 0 and math.isfinite(v)) for v in values):
                raise ValueError(f"{name}: expected finite numbers >= 0, got {values}")
        if self.workers < 1:
            raise ValueError(f"workers: expected a positive integer, got {self.workers}")
        if not (self.keep_frac >= 0 and math.isfinite(self.keep_frac)):
            raise ValueError(f"keep_frac: expected a finite number >= 0, got {self.keep_frac}")
        from hrlsched.envs.hint import RESERVE_RUNNING, WINDOWS
        from hrlsched.policies.optimus import FIRST_ORDERS, REMAINING_FROM

        if self.first_order not in FIRST_ORDERS:
            raise ValueError(f"first_order: expected one of {FIRST_ORDERS}, got {self.first_order!r}")
        if self.remaining_from not in REMAINING_FROM:
            raise ValueError(f"remaining_from: expected one of {REMAINING_FROM}, got {self.remaining_from!r}")
        if self.reserve_running not in RESERVE_RUNNING.values():
            raise ValueError(f"reserve_running: expected true, false or 'hint', got {self.reserve_running!r}")
        if self.window not in WINDOWS:
            raise ValueError(f"window: expected one of {WINDOWS}, got {self.window!r}")
        if self.recheck_s is not None and not (self.recheck_s > 0 and math.isfinite(self.recheck_s)):
            raise ValueError(f"recheck_s: expected a positive number of seconds or None, got {self.recheck_s!r}")
        if self.bonus is not None and not math.isfinite(self.bonus):
            raise ValueError(f"bonus: expected a finite number or None, got {self.bonus!r}")

    def points(self) -> list[Point]:
        return [(float(g), float(a), float(h)) for g in self.grid for a in self.remaining_weights for h in self.keep_s]


def with_weight(payload: dict[str, Any], weight: float, remaining_weight: float = 0.0,
                keep_s: float = 0.0, on_menu: bool = False, keep_frac: float = 0.0,
                reserve_running: bool | str = True, first_order: str = "arrival",
                window: str = "arrival", recheck_s: float | None = None,
                observe_rounds: bool = False, remaining_from: str = "fit",
                bonus: float | None = None) -> dict[str, Any]:
    """A copy of a level-1 policy payload whose network has the hint-gap
    weight ``weight`` (in units of ``GAP_SCALE``) and, where ``bonus`` is
    given, that weight on the hint slot's score (``NetConfig.hint_bonus``;
    None: none), and whose hint runs with
    ``remaining_weight``, ``keep_s``, ``keep_frac``, ``first_order``, ``observe_rounds`` and
    ``remaining_from``, and with ``on_menu``
    the worker counts of the agent's menu (no options when none is set: the
    hint as its paper runs it); ``reserve_running``, ``window`` and
    ``recheck_s`` as ``DecisionPoint``'s (their defaults, True, ``"arrival"``
    and None, are not written)."""
    if payload.get("part") != "allocate":
        raise CheckpointError(f"tune: expected a level-1 checkpoint (part 'allocate'), got {payload.get('part')!r}")
    hint = payload.get("env_kwargs", {}).get("hint")
    if not hint:
        raise CheckpointError("tune: the checkpoint decides without a hint (env_kwargs 'hint'); the hint-gap "
                                   "weight would have nothing to compare with (train with --option hint=optimus)")
    net = dict(payload["net"])
    net["net"] = {**net["net"], "hint_gap": True}
    state = dict(payload["state_dict"])
    state["gap"] = torch.tensor(float(weight))
    net["net"]["hint_bonus"] = bonus is not None
    state.pop("bonus", None)
    if bonus is not None:
        state["bonus"] = torch.tensor(float(bonus))
    keep = {k: v for k, v in payload.items() if k not in ("optimizer", "rng")}
    kw = {k: v for k, v in payload["env_kwargs"].items() if k not in ("hint_options", "reserve_running", "window",
                                                                         "recheck_s")}
    if reserve_running is not True:
        kw["reserve_running"] = reserve_running
    if window != "arrival":
        kw["window"] = window
    if recheck_s is not None:
        kw["recheck_s"] = float(recheck_s)
    if (remaining_weight or keep_s or on_menu or keep_frac or first_order != "arrival" or observe_rounds
            or remaining_from != "fit"):
        from hrlsched.policies.registry import ALLOCATIONS

        opts: dict[str, Any] = {"remaining_weight": float(remaining_weight), "keep_s": float(keep_s)}
        if keep_frac:
            opts["keep_frac"] = float(keep_frac)
        if first_order != "arrival":
            opts["first_order"] = first_order
        if observe_rounds:
            opts["observe_rounds"] = True
        if remaining_from != "fit":
            opts["remaining_from"] = remaining_from
        if on_menu:
            from hrlsched.envs.candidates import WORKER_OPTIONS

            opts["worker_counts"] = [int(x) for x in kw.get("worker_options", WORKER_OPTIONS)]
        try:
            ALLOCATIONS[hint].factory(**opts)
        except (TypeError, KeyError) as e:
            raise CheckpointError(f"tune: the hint {hint!r} takes no options {sorted(opts)} ({e}); "
                                       "search remaining_weights, keep_s and keep_frac with an optimus hint only") from None
        kw["hint_options"] = opts
    return {**keep, "net": net, "state_dict": state, "env_kwargs": kw, "hint_gap_weight": float(weight)}


def _episode(path: str, scenario: str, overrides: list[str], seed: int) -> tuple[float, int]:
    import numpy as np

    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    torch.set_num_threads(1)
    cfg = resolve_run_config(scenario, "hrl", seed, overrides)
    cfg = cfg.model_copy(update={"checkpoint": path})
    res = simulate(cfg)
    arrival = np.array([j.arrival_s for j in res.jobs])
    return float(np.mean(res.finish_s - arrival)), int(res.restarts.sum())


def _row(phase: str, point: Point, seed: int, jct: float, restarts: int) -> str:
    g, a, h = point
    return f"{phase},{g},{a},{h},{seed},{jct:.3f},{restarts}\n"


def _done(path: Path) -> dict[tuple[str, Point, int], tuple[float, int]]:
    """The finished episodes of ``search.csv``. A table of the first
    searches (the gap weight alone) is rewritten with the two new columns
    (0), so that a resumed search appends rows of one shape."""
    if not path.is_file():
        return {}
    with path.open() as f:
        rows = list(csv.DictReader(f))
    out: dict[tuple[str, Point, int], tuple[float, int]] = {}
    for r in rows:
        point = (float(r["weight"]), float(r.get("remaining_weight") or 0), float(r.get("keep_s") or 0))
        out[(r["phase"], point, int(r["seed"]))] = (float(r["avg_jct_s"]), int(r["restarts"]))
    if rows and "remaining_weight" not in rows[0]:
        from hrlsched.io import write_text

        write_text(path, ",".join(FIELDS) + "\n" + "".join(_row(ph, pt, s, *v) for (ph, pt, s), v in out.items()))
    return out


def run(cfg: TuneConfig, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The search; returns the chosen point (gap weight, remaining weight,
    keep threshold) and the mean average JCTs (s) per point on the training
    seeds, and for ``ORIGIN`` and the chosen one on the held-back seeds."""
    cfg.validate()
    start = time.time()
    out.mkdir(parents=True, exist_ok=True)
    if (out / "config.yaml").is_file():  # search.csv's rows do not say what holds at every point
        import yaml

        saved = yaml.safe_load((out / "config.yaml").read_text()) or {}
        defaults = {f.name: f.default for f in dataclasses.fields(TuneConfig)}
        for name in HINT_SETTINGS:
            before = saved.get(name, defaults[name])
            if before != getattr(cfg, name):
                raise ValueError(f"{name}: {out} holds a search with {name}={before}; use another --out")
    write_config(out, cfg)
    base = ckpt.load(cfg.checkpoint)
    table = out / "search.csv"
    done = _done(table)
    paths = {}
    settings = {name: getattr(cfg, name) for name in HINT_SETTINGS}
    settings["on_menu"] = settings.pop("hint_on_menu")
    for pt in {*cfg.points(), ORIGIN}:
        g, a, h = pt
        p = out / "weights" / (f"w{g:g}.pt" if not (a or h) else f"w{g:g}-a{a:g}-h{h:g}.pt")
        if pt != ORIGIN:
            p = p.with_name(p.stem + "-menu" * cfg.hint_on_menu + f"-f{cfg.keep_frac:g}" * bool(cfg.keep_frac)
                            + f"-r{cfg.reserve_running}" * (cfg.reserve_running is not True)
                            + "-first" * (cfg.first_order != "arrival") + f"-win{cfg.window}" * (cfg.window != "arrival")
                            + (f"-re{cfg.recheck_s:g}" if cfg.recheck_s is not None else "") + "-obs" * cfg.observe_rounds
                            + f"-rem{cfg.remaining_from}" * (cfg.remaining_from != "fit")
                            + (f"-b{cfg.bonus:g}" if cfg.bonus is not None else "") + ".pt")
        if not p.is_file():  # ORIGIN: the cloned network and the hint as its paper runs it
            save(p, with_weight(base, g, a, h, **({} if pt == ORIGIN else settings)))
        paths[pt] = str(p)

    def measure(phase: str, points: list[Point], seeds: list[int]) -> dict[Point, float]:
        todo = [(pt, s) for pt in points for s in seeds if (phase, pt, s) not in done]
        if todo:
            with ProcessPoolExecutor(min(cfg.workers, len(todo))) as ex:
                futs = {ex.submit(_episode, paths[pt], cfg.scenario, list(cfg.overrides), s): (pt, s)
                        for pt, s in todo}
                for fut in futs:
                    pt, s = futs[fut]
                    jct, restarts = fut.result()
                    jct = round(jct, 3)  # as search.csv keeps it, so that a resumed search gives the same figures
                    done[(phase, pt, s)] = (jct, restarts)
                    new = not table.is_file()
                    with table.open("a", newline="") as f:  # one whole row per finished episode
                        if new:
                            f.write(",".join(FIELDS) + "\n")
                        f.write(_row(phase, pt, s, jct, restarts))
                    log(f"{phase} {label(pt)} seed {s}: avg JCT {jct / 3600:.3f} h, {restarts} restarts")
        return {pt: sum(done[(phase, pt, s)][0] for s in seeds) / len(seeds) for pt in points}

    train = measure("train", cfg.points(), list(cfg.train_seeds))
    best = min(train, key=lambda pt: (train[pt], sum(abs(x) for x in pt)))
    valid = measure("valid", sorted({ORIGIN, best}), list(cfg.valid_seeds))
    summary_path = out / "summary.json"
    before = json.loads(summary_path.read_text())["elapsed_s"] if summary_path.is_file() else 0.0
    summary = {"weight": best[0], "remaining_weight": best[1], "keep_s": best[2], "chosen": label(best),
               **{name: getattr(cfg, name) for name in HINT_SETTINGS},
               "elapsed_s": before + time.time() - start,  # wall time, summed over resumed calls
               "train_avg_jct_s": {label(k): v for k, v in train.items()},
               "valid_avg_jct_s": {label(k): v for k, v in valid.items()}}
    payload = ckpt.load(paths[best])
    payload["tune"] = {"config": dataclasses.asdict(cfg), **summary}
    save(out / "best-policy.pt", payload)
    from hrlsched.io import write_text

    write_text(summary_path, json.dumps(summary, indent=2) + "\n")
    return {"point": best, "train": train, "valid": valid}
