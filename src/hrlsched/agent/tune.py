"""``hrlsched tune``: policy search over the agent's hint-gap weight.

A cloned level-1 agent takes its hint's slot; the shared scorer reads the
candidate rows one by one, so it cannot see that another architecture or
mode at the hint's worker count would progress faster (the heuristics keep
the workload's default for jobs that leave them open). ``NetConfig.hint_gap``
adds one weight on that gap (``nets.hint_speed_gap``). PPO moves a single
weight by about its learning rate per update, far too slowly for a weight
whose useful values are of order one or more, and its per-choice credit is
drowned in the thousands of choices of an episode; a whole-episode search
on one parameter is cheap and exact instead: the simulation is
deterministic, so the grid's values are compared on the same training
workloads (common random numbers), every episode as ``hrl`` would run it.

Procedure: the checkpoint ``--checkpoint`` (its other weights unchanged)
with each weight of ``grid`` (in units of ``nets.GAP_SCALE``) on the
training seeds (>= 1000); the weight of the lowest mean average JCT is then
run on the held-back seeds (100-104) beside weight 0, and written as
``OUT/best-policy.pt`` (what ``--policy hrl --checkpoint`` loads) with
``OUT/summary.json`` (the figures, and the wall time spent). Every
episode's result is appended to ``OUT/search.csv`` as it finishes, so
``--resume`` (the same command again) runs only what is missing.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.literature import DEFAULT_VALID_SEEDS, check_seeds, write_config

FIELDS = ["phase", "weight", "seed", "avg_jct_s", "restarts"]


@dataclass
class TuneConfig:
    checkpoint: str
    scenario: str = "default"
    overrides: list[str] = field(default_factory=list)
    grid: list[float] = field(default_factory=lambda: [0.0, 1.0, 2.0, 3.0, 5.0, 10.0])
    train_seeds: list[int] = field(default_factory=lambda: list(range(1000, 1010)))
    valid_seeds: list[int] = field(default_factory=lambda: list(DEFAULT_VALID_SEEDS))
    workers: int = 2

    def validate(self) -> None:
        check_seeds(self.train_seeds, self.valid_seeds)
        if not self.grid:
            raise ValueError("grid: expected at least one weight")
        if self.workers < 1:
            raise ValueError(f"workers: expected a positive integer, got {self.workers}")


def with_weight(payload: dict[str, Any], weight: float) -> dict[str, Any]:
    """A copy of a level-1 policy payload whose network has the hint-gap
    weight ``weight`` (in units of ``GAP_SCALE``)."""
    if payload.get("part") != "allocate":
        raise ckpt.CheckpointError(f"tune: expected a level-1 checkpoint (part 'allocate'), got {payload.get('part')!r}")
    if not payload.get("env_kwargs", {}).get("hint"):
        raise ckpt.CheckpointError("tune: the checkpoint decides without a hint (env_kwargs 'hint'); the hint-gap "
                                   "weight would have nothing to compare with (train with --option hint=optimus)")
    net = dict(payload["net"])
    net["net"] = {**net["net"], "hint_gap": True}
    state = dict(payload["state_dict"])
    state["gap"] = torch.tensor(float(weight))
    keep = {k: v for k, v in payload.items() if k not in ("optimizer", "rng")}
    return {**keep, "net": net, "state_dict": state, "hint_gap_weight": float(weight)}


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


def _done(path: Path) -> dict[tuple[str, float, int], tuple[float, int]]:
    if not path.is_file():
        return {}
    with path.open() as f:
        return {(r["phase"], float(r["weight"]), int(r["seed"])): (float(r["avg_jct_s"]), int(r["restarts"]))
                for r in csv.DictReader(f)}


def run(cfg: TuneConfig, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The search; returns the chosen weight and the mean average JCTs (s)
    per weight on the training seeds and for 0 and the chosen one on the
    held-back seeds."""
    cfg.validate()
    start = time.time()
    out.mkdir(parents=True, exist_ok=True)
    write_config(out, cfg)
    base = ckpt.load(cfg.checkpoint)
    table = out / "search.csv"
    done = _done(table)
    paths = {}
    for w in {*cfg.grid, 0.0}:
        p = out / "weights" / f"w{w:g}.pt"
        if not p.is_file():
            ckpt.save(p, with_weight(base, w))
        paths[w] = str(p)

    def measure(phase: str, weights: list[float], seeds: list[int]) -> dict[float, float]:
        todo = [(w, s) for w in weights for s in seeds if (phase, w, s) not in done]
        if todo:
            with ProcessPoolExecutor(min(cfg.workers, len(todo))) as ex:
                futs = {ex.submit(_episode, paths[w], cfg.scenario, list(cfg.overrides), s): (w, s) for w, s in todo}
                for fut in futs:
                    w, s = futs[fut]
                    jct, restarts = fut.result()
                    jct = round(jct, 3)  # as search.csv keeps it, so that a resumed search gives the same figures
                    done[(phase, w, s)] = (jct, restarts)
                    new = not table.is_file()
                    with table.open("a", newline="") as f:  # one whole row per finished episode
                        wr = csv.writer(f)
                        if new:
                            wr.writerow(FIELDS)
                        wr.writerow([phase, w, s, f"{jct:.3f}", restarts])
                    log(f"{phase} weight {w:g} seed {s}: avg JCT {jct / 3600:.3f} h, {restarts} restarts")
        return {w: sum(done[(phase, w, s)][0] for s in seeds) / len(seeds) for w in weights}

    train = measure("train", list(cfg.grid), list(cfg.train_seeds))
    best = min(train, key=lambda w: (train[w], abs(w)))
    valid = measure("valid", sorted({0.0, best}), list(cfg.valid_seeds))
    summary_path = out / "summary.json"
    before = json.loads(summary_path.read_text())["elapsed_s"] if summary_path.is_file() else 0.0
    summary = {"weight": best, "elapsed_s": before + time.time() - start,  # wall time, summed over resumed calls
               "train_avg_jct_s": {f"{k:g}": v for k, v in train.items()},
               "valid_avg_jct_s": {f"{k:g}": v for k, v in valid.items()}}
    payload = ckpt.load(paths[best])
    payload["tune"] = {"config": dataclasses.asdict(cfg), **summary}
    ckpt.save(out / "best-policy.pt", payload)
    from hrlsched.io import write_text

    write_text(summary_path, json.dumps(summary, indent=2) + "\n")
    return {"weight": best, "train": train, "valid": valid}
