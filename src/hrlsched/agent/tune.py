"""``hrlsched tune``: a search over the settings of the agent's hint and its
two rule weights (``policies.hint.HintConfig``), by whole episodes.

A cloned level-1 agent takes its hint's slot; the shared scorer reads the
candidate rows one by one, so it cannot see that another architecture or
mode at the hint's worker count would progress faster (the heuristics keep
the workload's default for jobs that leave them open). ``HintConfig.gap``
puts one weight on that gap (``nets.hint_speed_gap``), ``HintConfig.bonus``
one on the hint's slot; the hint itself (``optimus``) has options its paper
fixes (``HintConfig``'s docs). PPO moves a single weight by about its
learning rate per update, far too slowly for a weight whose useful values
are of order one or more; its per-choice credit is drowned in the thousands
of choices of an episode; and the hint's options are not weights of the
network at all. A whole-episode search over a few values is cheap and exact
instead: the simulation is deterministic, so every point meets the same
training workloads (common random numbers), every episode as ``hrl`` would
run it. These settings are rules, not learning: the agent's ablations
(``hrlsched evaluate``) report them apart.

Procedure: the checkpoint ``--checkpoint`` (its network's other weights
unchanged) with the hint ``--hint`` changed along each ``--vary`` axis (the
product of the axes: the points) on the training runs (``--runs
SCENARIO:SEEDS``, seeds >= 1000); the point whose score (the geometric mean
over the scenarios of their mean average JCT: scale-free, so a scenario of
long jobs does not outweigh the others) is lowest is then run on the
held-back seeds (100-104) of the same scenarios beside ``ORIGIN`` (the
checkpoint as cloned, its hint the paper's policy, no rule weights), and
written as ``OUT/best-policy.pt`` (what ``--policy hrl --checkpoint`` loads)
with ``OUT/summary.json`` (the figures, and the wall time spent). Every
episode's result is appended to ``OUT/search.csv`` as it finishes, so the
same command again runs only what is missing. ``--hint-alone`` searches the
hint heuristic alone (its policy, ``pack`` placing, no network) instead, to
choose its settings across workload families before an agent meets them.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import re
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hrlsched.agent import checkpoint as ckpt
from hrlsched.agent.common.checkpoint import save
from hrlsched.agent.common.seeds import DEFAULT_VALID_SEEDS, check_seeds
from hrlsched.agent.common.training_run import write_config
from hrlsched.policies.hint import HintConfig
from hrlsched.seeds import parse_seeds

FIELDS = ["phase", "hint", "scenario", "seed", "avg_jct_s", "restarts"]
ORIGIN_LABEL = "origin"


def parse_run(text: str) -> tuple[str, list[int]]:
    """``SCENARIO:SEEDS``, e.g. ``default:1000-1009`` or ``comm:1000,1001``."""
    scenario, colon, seeds = text.rpartition(":")
    if not colon or not scenario:
        raise ValueError(f"runs {text!r}: expected SCENARIO:SEEDS, e.g. default:1000-1009")
    return scenario, parse_seeds(seeds)


def parse_axis(text: str) -> tuple[str, list[str]]:
    """``SETTING=v1,v2,...`` (a ``HintConfig`` setting by short or long name)."""
    key, eq, values = text.partition("=")
    names = {f.metadata["short"]: f.name for f in HintConfig.settings()} | {f.name: f.name for f in
                                                                              HintConfig.settings()}
    if not eq or key.strip() not in names or not values.strip():
        raise ValueError(f"vary {text!r}: expected SETTING=v1,v2,... with a setting of the hint "
                         f"({', '.join(sorted(names))})")
    return key.strip(), [v.strip() for v in values.split(",") if v.strip()]


@dataclass
class TuneConfig:
    checkpoint: str
    runs: list[str] = field(default_factory=lambda: ["default:1000-1009"])  # SCENARIO:SEEDS, training seeds
    overrides: list[str] = field(default_factory=list)  # config overrides for every run
    hint: str = ""  # the settings at every point but ORIGIN (HintConfig.parse text)
    vary: list[str] = field(default_factory=lambda: ["g=0,1,2,3,5,10"])  # axes: SETTING=v1,v2,...
    valid_seeds: list[int] = field(default_factory=lambda: list(DEFAULT_VALID_SEEDS))
    workers: int = 2
    # the hint heuristic alone (its policy, `pack` placing, no network; `checkpoint` may be ""):
    # to choose the hint's settings across workload families before the agent meets them
    hint_alone: bool = False

    def validate(self) -> None:
        if not self.checkpoint and not self.hint_alone:
            raise ValueError("checkpoint: expected a level-1 checkpoint (or --hint-alone)")
        if not self.runs:
            raise ValueError("runs: expected at least one SCENARIO:SEEDS")
        check_seeds([s for r in self.runs for s in parse_run(r)[1]], self.valid_seeds)
        if self.workers < 1:
            raise ValueError(f"workers: expected a positive integer, got {self.workers}")
        self.points()  # every point a valid hint

    def scenarios(self) -> list[tuple[str, list[int]]]:
        return [parse_run(r) for r in self.runs]

    def points(self) -> list[HintConfig]:
        base = HintConfig.parse(self.hint)
        axes = [parse_axis(a) for a in self.vary]
        out = []
        for values in itertools.product(*[vals for _, vals in axes]):
            text = ",".join(f"{k}={v}" for (k, _), v in zip(axes, values))
            pt = HintConfig.parse(text, base=base)
            if pt not in out:
                out.append(pt)
        return out


def label(hint: HintConfig) -> str:
    return hint.text() or "paper"


def _episode(path: str, scenario: str, overrides: list[str], seed: int, alone: str | None = None
             ) -> tuple[float, int]:
    """One episode of the agent of checkpoint ``path``, or with ``alone``
    (a hint's text) of that hint heuristic alone, `pack` placing."""
    import numpy as np

    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate

    torch.set_num_threads(1)
    if alone is None:
        cfg = resolve_run_config(scenario, "hrl", seed, overrides)
        res = simulate(dataclasses.replace(cfg, checkpoint=path))
    else:
        from hrlsched.envs.candidates import WORKER_OPTIONS
        from hrlsched.policies.base import ComposedScheduler
        from hrlsched.policies.registry import PLACEMENTS

        sched = ComposedScheduler(HintConfig.parse(alone).make_policy(WORKER_OPTIONS), PLACEMENTS["pack"].factory())
        res = simulate(resolve_run_config(scenario, "fifo", seed, overrides), scheduler=sched)
    arrival = np.array([j.arrival_s for j in res.jobs])
    return float(np.mean(res.finish_s - arrival)), int(res.restarts.sum())


Key = tuple[str, str, str, int]  # (phase, point's label, scenario, seed)


def _done(path: Path) -> dict[Key, tuple[float, int]]:
    """The finished episodes of ``search.csv``."""
    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and set(FIELDS) - set(rows[0]):
        raise ValueError(f"{path}: a search table of another version (columns {sorted(rows[0])}, expected "
                         f"{FIELDS}); use another --out")
    return {(r["phase"], r["hint"], r["scenario"], int(r["seed"])): (float(r["avg_jct_s"]), int(r["restarts"]))
            for r in rows}


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", name) + ".pt"


def run(cfg: TuneConfig, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The search; returns the chosen point, and the mean average JCT (s)
    per point and scenario on the training seeds (``train``), and for
    ``ORIGIN`` and the chosen point over the held-back runs (``valid``)."""
    cfg.validate()
    start = time.time()
    out.mkdir(parents=True, exist_ok=True)
    if (out / "config.yaml").is_file():  # rows name their point and run, not the checkpoint and overrides
        import yaml

        saved = yaml.safe_load((out / "config.yaml").read_text()) or {}
        for name in ("checkpoint", "overrides"):
            if saved.get(name) != getattr(cfg, name):
                raise ValueError(f"{name}: {out} holds a search with {name}={saved.get(name)!r}; use another --out")
    write_config(out, cfg)
    points = cfg.points()
    paths: dict[str, str] = {}
    texts: dict[str, str | None] = {}
    if cfg.hint_alone:
        origin = HintConfig()
        for pt, name in [*((p, label(p)) for p in points), (origin, ORIGIN_LABEL)]:
            paths[name], texts[name] = "", pt.text()
    else:
        base = ckpt.load(cfg.checkpoint)
        origin = HintConfig(policy=ckpt.hint_of(base).policy)
        for pt, name in [*((p, label(p)) for p in points), (origin, ORIGIN_LABEL)]:
            p = out / "weights" / _file_name(name)
            if not p.is_file():
                save(p, ckpt.with_hint(base, pt))
            paths[name], texts[name] = str(p), None
    table = out / "search.csv"
    done = _done(table)

    def measure(phase: str, named: list[tuple[str, HintConfig]], runs: list[tuple[str, list[int]]]
                ) -> dict[str, dict[str, float]]:
        todo = [(name, sc, s) for name, _ in named for sc, seeds in runs for s in seeds
                if (phase, name, sc, s) not in done]
        if todo:
            with ProcessPoolExecutor(min(cfg.workers, len(todo))) as ex:
                futs = {ex.submit(_episode, paths[name], sc, list(cfg.overrides), s, texts[name]): (name, sc, s)
                        for name, sc, s in todo}
                for fut in futs:
                    name, sc, s = futs[fut]
                    jct, restarts = fut.result()
                    jct = round(jct, 3)  # as search.csv keeps it, so that a resumed search gives the same figures
                    done[(phase, name, sc, s)] = (jct, restarts)
                    new = not table.is_file()
                    with table.open("a", newline="") as f:  # one whole row per finished episode
                        w = csv.writer(f, lineterminator="\n")
                        if new:
                            w.writerow(FIELDS)
                        w.writerow([phase, name, sc, s, f"{jct:.3f}", restarts])
                    log(f"{phase} {name} {sc} seed {s}: avg JCT {jct / 3600:.3f} h, {restarts} restarts")
        return {name: {sc: sum(done[(phase, name, sc, s)][0] for s in seeds) / len(seeds) for sc, seeds in runs}
                for name, _ in named}

    def score(per_scenario: dict[str, float]) -> float:
        return math.exp(sum(math.log(v) for v in per_scenario.values()) / len(per_scenario))

    runs = cfg.scenarios()
    train = measure("train", [(label(p), p) for p in points], runs)
    order = {label(p): i for i, p in enumerate(points)}
    best_name = min(train, key=lambda n: (score(train[n]), order[n]))  # ties: the first point given
    best = points[order[best_name]]
    valid_runs = [(sc, list(cfg.valid_seeds)) for sc, _ in runs]
    valid = measure("valid", [(ORIGIN_LABEL, origin), (best_name, best)], valid_runs)
    summary_path = out / "summary.json"
    before = json.loads(summary_path.read_text())["elapsed_s"] if summary_path.is_file() else 0.0
    summary = {"chosen": best_name, "hint": dataclasses.asdict(best), "origin": ORIGIN_LABEL,
               "elapsed_s": before + time.time() - start,  # wall time, summed over resumed calls
               "train_avg_jct_s": train, "train_score_s": {n: score(v) for n, v in train.items()},
               "valid_avg_jct_s": {n: score(v) for n, v in valid.items()}, "valid_per_scenario_s": valid}
    if not cfg.hint_alone:
        payload = ckpt.load(paths[best_name])
        payload["tune"] = {"config": dataclasses.asdict(cfg), **summary}
        save(out / "best-policy.pt", payload)
    from hrlsched.io import write_text

    write_text(summary_path, json.dumps(summary, indent=2) + "\n")
    return {"point": best, "label": best_name, "train": train, "valid": valid}
