"""Evolution strategies on the agent's learned parts: ``hrlsched train-es``.

The ``hrl`` agent scores each job's menu slots with its rules (the hint's
bonus and the speed gap, ``agent.rules``) plus what it learned. Here that is
a residual over the rules, a weighted sum of a few named features of each
slot relative to the hint's (``agent.residual``); the free candidate scorer
of the starting checkpoint is silenced. With the weights at zero the agent
is its rules, to the bit. This trainer learns the weights where the
lookahead found room (``docs/headroom.md``) by the gradient estimate of
evolution strategies (Salimans et al., 2017): antithetic pairs of
perturbations, each pair scored on the same fresh training workloads
(common random numbers), the score of an episode its gain in average JCT
over the rules' on the same workload, shaped into centered ranks, and Adam
on the estimate. Or (``method="cem"``) the cross-entropy method (Rubinstein,
1999; as in Szita and Lorincz's Tetris controllers): the same antithetic
samples, each weight drawn with its own spread; the mean and spread move
to the best quarter's. A residual acts through an argmax past the rules'
margin, so most small changes change no choice and some change many: a
landscape of plateaus and cliffs where a gradient estimate moved little
(``docs/agent.md``).

Why not PPO: the agent's per-choice credit is the job-seconds of a whole
episode, which PPO's per-step advantages estimated badly here
(``docs/agent-history.md``); ES scores whole episodes against the rules
directly, and its only cost is episodes, which run on the process pool.
Why not the free scorer's last layer (64 weights on its hidden features):
tried first, small perturbations changed no choice and larger ones made
*wait* win nearly everywhere, a landscape of flat plateaus and cliffs.

What is learned (``learn``, ``PARTS``): the residual (per job and slot,
``agent.residual``), the point selector (per decision point, another
heuristic's whole decision, ``agent.selector``), the placement choice (per
job placed, one of a few candidate placements, ``agent.placement_choice``),
or several, as one vector of weights; the parts not learned are the
starting checkpoint's, and a learned part it has is the first mean (a run
goes on from an earlier run's agent). The
episodes' workloads come from one scenario (``scenario``, ``overrides``) or
alternate among several cases (``cases``, ``SCENARIO[@key=value,...]``, as
``hrlsched headroom``'s): one agent for a family of clusters.

Seeds: training workloads from 1000 on (fresh each iteration); the curve
is measured on held-back seeds 100-119; evaluation seeds 0-99 are never
seen. Every iteration saves ``state.pt`` (whole, by rename) so that
``--resume`` continues; ``best.pt`` is an ``hrl`` checkpoint of the best
held-back gain so far, and ``curve.csv``/``curve.png`` the curve. A run
from learned weights measures them first (iteration 0 of the curve): its
``best.pt`` is the start until an iteration beats it on the held-back seeds.

``drop``: selector or residual features whose weights are held at 0 (the
feature is not read): the ablation of a feature, with the same draws as the
run with it (the perturbations are drawn whole, then masked); or a search
over fewer weights (the residual's halving alone, say).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.agent.placement_choice import PLACEMENT_FEATURES, with_placement
from hrlsched.agent.residual import RESIDUAL_FEATURES, with_residual
from hrlsched.agent.selector import SELECTOR_FEATURES, SELECTOR_POLICIES, with_selector

TRAIN_SEED0 = 1000
FITNESS = ("mean", "ranks")
SELECT = ("mean", "worst-case")
HELD_BACK = tuple(range(100, 120))
CEM_SMOOTH = 0.7  # the share of the elite's mean and spread taken each iteration
LAYER = "cand.2.weight"  # the free scorer's last layer: zeroed, so that the agent is its rules plus the residual
#: the parts ES can learn, by checkpoint key: their number of weights
PARTS = {"residual": len(RESIDUAL_FEATURES), "selector": len(SELECTOR_POLICIES) * len(SELECTOR_FEATURES),
         "placement": len(PLACEMENT_FEATURES)}


@dataclass(frozen=True)
class ESConfig:
    """The settings of a run (saved as ``config.yaml``)."""

    scenario: str = "hetero"
    overrides: tuple[str, ...] = ()
    init: str | None = None  # the checkpoint whose encoders are kept (None: the shipped one)
    iterations: int = 12
    pairs: int = 6  # antithetic pairs per iteration
    seeds_per_pair: int = 2  # training workloads each pair is scored on (the same for all pairs of an iteration)
    sigma: float = 0.5  # perturbation scale of the residual's weights (the rules' margin, the hint's bonus, is 1)
    lr: float = 0.2  # Adam's step
    eval_every: int = 3  # iterations between held-back evaluations (and the last)
    held_back: tuple[int, ...] = HELD_BACK
    seed: int = 0  # the perturbations' stream
    workers: int = 2
    method: str = "es"  # "es": the gradient estimate and Adam; "cem": the cross-entropy method
    learn: tuple[str, ...] = ("residual",)  # the parts learned (PARTS), in theta's order
    cases: tuple[str, ...] = ()  # several training cases, SCENARIO[@key=value,...], instead of scenario+overrides
    placement: str | None = None  # the placement of the agent's rules (None: the starting checkpoint's)
    # how a sample is scored on the iteration's workloads: "mean", its mean gain over the rules (%); "ranks",
    # its mean rank among the samples workload by workload, so that a workload where gains are small but
    # steady (a trace replayed exactly) counts as much as one where they are large and noisy
    fitness: str = "mean"
    # which held-back evaluation becomes best.pt: "mean", the highest mean gain; "worst-case", the least loss
    # beyond the 95% interval of its worst case (each case's gains over the held-back seeds; 0 where no case
    # loses beyond its interval, as "learning never hurts" reads), ties by the mean
    select: str = "mean"
    drop: tuple[str, ...] = ()  # selector or residual features held at 0: a feature's ablation, with the same draws

    def __post_init__(self) -> None:
        for name in ("iterations", "pairs", "seeds_per_pair", "eval_every", "workers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"es {name}: expected a positive integer, got {getattr(self, name)}")
        if not self.sigma > 0 or not self.lr > 0:
            raise ValueError(f"es sigma, lr: expected > 0, got {self.sigma}, {self.lr}")
        if any(0 <= s < 100 for s in self.held_back):
            raise ValueError("es held_back: evaluation seeds 0-99 are never used in training")
        if not self.held_back:
            raise ValueError("es held_back: expected at least one seed")
        if self.fitness not in FITNESS:
            raise ValueError(f"es fitness: expected one of {list(FITNESS)}, got {self.fitness!r}")
        if self.select not in SELECT:
            raise ValueError(f"es select: expected one of {list(SELECT)}, got {self.select!r}")
        if self.method not in ("es", "cem"):
            raise ValueError(f"es method: expected 'es' or 'cem', got {self.method!r}")
        if not self.learn or len(set(self.learn)) != len(self.learn) or any(p not in PARTS for p in self.learn):
            raise ValueError(f"es learn: expected distinct parts among {sorted(PARTS)}, got {list(self.learn)}")
        named = {f for p, names in _FEATURES.items() if p in self.learn for f in names}
        if self.drop and (len(set(self.drop)) != len(self.drop) or any(f not in named for f in self.drop)):
            raise ValueError(f"es drop: expected features of the learned selector or residual among {sorted(named)}, "
                             f"got {list(self.drop)}")
        if self.cases and self.overrides:
            raise ValueError("es cases: each case carries its overrides (SCENARIO@key=value,...); give no --set with them")
        for c in self.training_cases():
            _case(c)  # the form checked here; the scenario where the run starts
        if self.placement is not None:
            from hrlsched.envs.base import heuristics

            heuristics(agent_allocates=True, placement=self.placement)  # an unknown or whole-job placement fails here

    def training_cases(self) -> tuple[str, ...]:
        """The cases the workloads come from, ``SCENARIO[@key=value,...]`` each."""
        if self.cases:
            return tuple(self.cases)
        return (self.scenario + ("@" + ",".join(self.overrides) if self.overrides else ""),)

    @property
    def dim(self) -> int:
        return sum(PARTS[p] for p in self.learn)

    def mask(self) -> np.ndarray:
        """1 for each weight that learns, 0 for the weights of ``drop``."""
        m = np.ones(self.dim)
        for part, names in _FEATURES.items():
            cols = [names.index(f) for f in self.drop if f in names]
            if cols and part in self.learn:
                i = sum(PARTS[p] for p in self.learn[: self.learn.index(part)])
                m[i:i + PARTS[part]].reshape(-1, len(names))[:, cols] = 0.0  # (the selector's: one row per policy)
        return m


_FEATURES = {"selector": SELECTOR_FEATURES, "residual": RESIDUAL_FEATURES}  # the parts whose features may be dropped


def _case(text: str) -> tuple[str, tuple[str, ...]]:
    """(scenario, overrides) of ``SCENARIO[@key=value,...]``."""
    from hrlsched.config import parse_case

    try:
        return parse_case(text)
    except ValueError:
        raise ValueError(f"es cases: {text!r}: expected SCENARIO[@key=value[,key=value]]") from None


def split(learn: tuple[str, ...], theta: np.ndarray | None) -> dict[str, np.ndarray | None]:
    """Each learned part's weights in ``theta`` (None: every part off, the rules)."""
    out: dict[str, np.ndarray | None] = {}
    i = 0
    for p in learn:
        out[p] = None if theta is None else np.asarray(theta[i:i + PARTS[p]], dtype=np.float64)
        i += PARTS[p]
    return out


# ------------------------------------------------------------------ workers
_WORKER: dict[str, Any] = {}


def _episode(init: str | None, case: str, seed: int, theta: np.ndarray | None,
             learn: tuple[str, ...] = ("residual",), placement: str | None = None) -> tuple[float, int]:
    """Average JCT (s) on one workload of ``case`` of the agent with
    ``theta`` as the weights of its learned parts ``learn`` (None: the
    rules, every learned part off), and the choices it made (its
    environment steps); its rules placed by ``placement`` (None: the
    checkpoint's); the agent and the workloads are kept per process."""
    import torch

    from hrlsched.agent.placement_choice import PlacementChoice
    from hrlsched.agent.policy import HRLScheduler
    from hrlsched.agent.selector import Selector
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.engine import Simulator

    sched = _WORKER.get(("agent", init, placement))
    if sched is None:
        sched = _WORKER[("agent", init, placement)] = HRLScheduler(init)
        with torch.no_grad():  # the free scorer silenced: the rules, plus the learned parts
            sched.net.cand[2].weight.zero_()
            sched.net.cand[2].bias.zero_()
        if placement is not None:
            sched.env_kwargs = {**sched.env_kwargs, "placement": placement}
        _WORKER[("fixed", init, placement)] = (sched.residual, sched.selector, sched.placement)
    residual, selector, choice = _WORKER[("fixed", init, placement)]
    parts = split(learn, theta)
    if theta is None:  # the rules: no learned part at all
        residual, selector, choice = None, None, None
    if "residual" in parts:
        residual = parts["residual"]
    if "selector" in parts:
        w = parts["selector"]
        selector = None if w is None else Selector(w)
    if "placement" in parts:
        w = parts["placement"]
        choice = None if w is None else PlacementChoice(w)
    sched.residual, sched.selector, sched.placement = residual, selector, choice
    sched._scorer = None  # made anew with these weights
    key = ("built", case, seed)
    built = _WORKER.get(key)
    if built is None:
        scenario, overrides = _case(case)
        cfg = resolve_run_config(scenario, "hrl", seed, list(overrides))
        built = _WORKER[key] = build_scenario(cfg.scenario, seed)
    res = Simulator(built.topology, built.jobs, built.perf, sched, built.engine, seed=seed,
                    predictor=built.predictor, sample_jobs=built.sample_jobs).run()
    done = ~np.isnan(res.finish_s)
    arrival = np.array([j.arrival_s for j in res.jobs])
    if not done.all():  # an unfinished job counts until the end of the run (a penalty, never a gain)
        res.finish_s[~done] = res.end_time_s
    return float(np.mean(res.finish_s - arrival)), int(sched.steps)


# ------------------------------------------------------------------ the loop
@dataclass
class ESState:
    theta: np.ndarray
    m: np.ndarray  # es: Adam's first moment
    v: np.ndarray  # es: Adam's second moment; cem: each weight's spread (0 before the first iteration)
    iteration: int = 0
    elapsed_s: float = 0.0
    best_gain: float = 0.0  # held-back gain over the rules (%) of best.pt (0 and no file: the rules themselves)
    best_worst_loss: float = 0.0  # how far best.pt's worst held-back case loses beyond its interval (<= 0)
    rules_held: dict[str, float] = field(default_factory=dict)  # the rules' JCT per held-back "case|seed"
    curve: list[dict[str, Any]] = field(default_factory=list)


def _ranks(x: np.ndarray) -> np.ndarray:
    """``x``'s ranks scaled to [-0.5, 0.5] (ties by order), in its shape."""
    r = np.empty(x.size)
    r[np.argsort(x, axis=None, kind="stable")] = np.arange(x.size)
    return (r / max(x.size - 1, 1) - 0.5).reshape(x.shape)


def _gain(rules: np.ndarray, jct: np.ndarray) -> np.ndarray:
    return 100.0 * (rules - jct) / rules


def _tied_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` (1-d) scaled to [0, 1], tied values sharing their mean rank."""
    order = np.argsort(x, kind="stable")
    r = np.empty(x.size)
    r[order] = np.arange(x.size, dtype=float)
    _, inv = np.unique(x, return_inverse=True)
    r = np.bincount(inv, r)[inv] / np.bincount(inv)[inv]
    return r / max(x.size - 1, 1)


def fitness(gains: np.ndarray, how: str = "mean") -> np.ndarray:
    """Each sample's score from its gains (%), shape (..., workloads):
    the mean gain, or (``ranks``) the mean over the workloads of its rank
    among all samples on that workload."""
    if how == "mean":
        return gains.mean(axis=-1)
    flat = gains.reshape(-1, gains.shape[-1])
    ranks = np.stack([_tied_ranks(flat[:, w]) for w in range(flat.shape[1])], axis=1)
    return ranks.mean(axis=1).reshape(gains.shape[:-1])


def case_gains(cases: list[str], gains: np.ndarray) -> dict[str, tuple[float, float]]:
    """Each case's mean gain over its held-back workloads and the half-width
    of its 95% interval (0 where they all gain alike: a trace replayed)."""
    from hrlsched.stats import interval

    out = {}
    for c in dict.fromkeys(cases):
        mean, half = interval([float(g) for k, g in zip(cases, gains) if k == c])
        out[c] = (mean, 0.0 if np.isnan(half) else half)
    return out


def worst_loss(by_case: dict[str, tuple[float, float]]) -> float:
    """How far the worst case loses beyond its 95% interval (<= 0; 0: none does)."""
    return min(min(0.0, m + h) for m, h in by_case.values())


def _score(select: str, loss: float, mean: float) -> tuple[float, ...]:
    """What ``select`` ranks held-back evaluations by (the higher, the better)."""
    return (loss, mean) if select == "worst-case" else (mean,)


def train(cfg: ESConfig, out: str | Path, resume: bool = False,
          log: Callable[[dict[str, Any]], None] | None = None) -> ESState:
    """Run (or continue, ``resume``) the training into ``out``."""
    import yaml

    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.common.shipped import shipped_checkpoint
    from hrlsched.agent.policy import SHIPPED
    from hrlsched.config import resolve_run_config
    from hrlsched.io import write_text

    out = Path(out)
    init = str(cfg.init) if cfg.init else str(shipped_checkpoint(SHIPPED))
    base_ck = ckpt.load(init)
    if LAYER not in base_ck["state_dict"] or base_ck["part"] != "allocate":
        raise ValueError(f"--init {init}: expected a level-1 hrl checkpoint with a candidate scorer ({LAYER})")
    cases = cfg.training_cases()
    for c in cases:  # a bad scenario or override fails first
        scenario, overrides = _case(c)
        resolve_run_config(scenario, "hrl", 0, list(overrides))
    dim = cfg.dim
    mask = cfg.mask()
    saved = {**asdict(cfg), "init": init, "overrides": list(cfg.overrides), "held_back": list(cfg.held_back),
             "learn": list(cfg.learn), "cases": list(cfg.cases), "drop": list(cfg.drop)}
    if not cfg.drop:
        del saved["drop"]  # as runs made before it was an option (they resume)
    cfg_text = yaml.safe_dump(saved, sort_keys=False)
    # what a resumed run must share with the saved one (more iterations, other workers: the same run)
    same = yaml.safe_dump({k: v for k, v in yaml.safe_load(cfg_text).items() if k not in ("iterations", "workers")},
                          sort_keys=False)
    state_path = out / "state.pt"
    if resume:
        state = _load_state(state_path, same)
        if np.shape(state.theta) != (dim,):  # a part that gained features since (agent.residual's arrived)
            raise ValueError(f"--resume: {state_path} holds {np.size(state.theta)} weights of {list(cfg.learn)}, "
                             f"this version's have {dim}; start another --out")
        write_text(out / "config.yaml", cfg_text)
    else:
        if state_path.exists():
            raise ValueError(f"--out {out}: a training is there already; --resume continues it")
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / "config.yaml", cfg_text)
        state = ESState(_start(base_ck, tuple(cfg.learn), init) * mask, np.zeros(dim), np.zeros(dim))
    rng = np.random.default_rng([cfg.seed, 0xE5])
    for _ in range(state.iteration):  # the perturbations already drawn, drawn again (the stream resumes)
        rng.standard_normal((cfg.pairs, dim))
    learn = tuple(cfg.learn)
    # the held-back workloads: every case at every held-back seed
    held_back = [(c, s) for c in cases for s in cfg.held_back]
    with ProcessPoolExecutor(max_workers=cfg.workers) as pool:
        steps = [0]

        def run(jobs: list[tuple[str, int, np.ndarray | None]]) -> np.ndarray:
            got = list(pool.map(_episode, *zip(*[(init, c, s, t, learn, cfg.placement) for c, s, t in jobs])))
            steps[0] += sum(n for _, n in got)
            return np.array([j for j, _ in got], dtype=float)

        def held_back_gain(k: int, row: dict[str, Any]) -> None:
            from hrlsched.stats import interval

            held = run([(c, s, state.theta.astype(np.float32)) for c, s in held_back])
            rh = np.array([state.rules_held[f"{c}|{s}"] for c, s in held_back])
            g = _gain(rh, held)
            mean, half = interval(list(g))
            by_case = case_gains([c for c, _ in held_back], g)
            worst = min(by_case, key=lambda c: by_case[c][0])
            row["held_back_gain_pct"], row["held_back_gain_ci95"] = mean, half
            row["held_back_worst_case"], row["held_back_worst_case_pct"] = worst, by_case[worst][0]
            row["held_back_by_case"] = {c: m for c, (m, _) in by_case.items()}
            row["held_back_worst_loss_pct"] = worst_loss(by_case)
            loss = row["held_back_worst_loss_pct"]
            # iteration 0: the start, the bar the run must beat; from the rules, best.pt must beat them
            if k == 0 or _score(cfg.select, loss, mean) > _score(cfg.select, state.best_worst_loss, state.best_gain):
                state.best_gain, state.best_worst_loss = mean, loss
                _save_agent(base_ck, state.theta, out / "best.pt", cfg, k, mean, init)

        def record(row: dict[str, Any]) -> None:
            state.curve.append(row)
            _save_state(state_path, state, same)
            _write_curve(out / "curve.csv", state.curve)
            if log:
                log(row)

        if not state.rules_held:
            state.rules_held = dict(zip([f"{c}|{s}" for c, s in held_back],
                                        run([(c, s, None) for c, s in held_back]).tolist()))
        if not state.curve and state.theta.any():
            # a run from learned weights starts where they are: best.pt must beat them, not just the rules
            t0 = time.perf_counter()
            row0: dict[str, Any] = {"iteration": 0, "episodes": 0, "train_gain_pct": None, "pair_spread_pct": None,
                                    "theta_norm": float(np.linalg.norm(state.theta))}
            held_back_gain(0, row0)
            state.elapsed_s += time.perf_counter() - t0
            row0["wall_s"], row0["steps_per_s"] = state.elapsed_s, None
            record(row0)
        while state.iteration < cfg.iterations:
            t0 = time.perf_counter()
            steps[0] = 0
            it = state.iteration
            eps = rng.standard_normal((cfg.pairs, dim)) * mask  # drawn whole: the same draws as without drop
            # the iteration's workloads, common to all its samples; the cases take turns
            seeds = [(cases[(it * cfg.seeds_per_pair + j) % len(cases)], TRAIN_SEED0 + it * cfg.seeds_per_pair + j)
                     for j in range(cfg.seeds_per_pair)]
            jobs: list[tuple[str, int, np.ndarray | None]] = [(c, s, None) for c, s in seeds]
            scale = (state.v if state.v.any() else np.full(dim, cfg.sigma)) if cfg.method == "cem" else cfg.sigma
            for e in eps:
                for sign in (1.0, -1.0):
                    jobs += [(c, s, (state.theta + sign * scale * e).astype(np.float32)) for c, s in seeds]
            jct = run(jobs)
            rules, rest = jct[: len(seeds)], jct[len(seeds):].reshape(cfg.pairs, 2, len(seeds))
            gains = _gain(rules, rest)  # (pairs, +/-, workloads): gain over the rules in %
            fit = fitness(gains, cfg.fitness)  # (pairs, +/-)
            k = it + 1
            if cfg.method == "cem":
                # the elite quarter's mean and spread, smoothed: plateaus and cliffs need no gradient
                if not state.v.any():
                    state.v = np.full(dim, cfg.sigma)
                thetas = state.theta + np.stack([eps, -eps], axis=1) * state.v  # (pairs, +/-, dim) as drawn
                flat, tf = fit.reshape(-1), thetas.reshape(-1, dim)
                elite = tf[np.argsort(-flat, kind="stable")[: max(2, flat.size // 4)]]
                state.theta = (1 - CEM_SMOOTH) * state.theta + CEM_SMOOTH * elite.mean(axis=0)
                state.v = np.maximum((1 - CEM_SMOOTH) * state.v + CEM_SMOOTH * elite.std(axis=0), 0.1 * cfg.sigma)
            else:
                # centered ranks (Salimans et al.): a perturbation that makes waiting or hogging win costs
                # hundreds of percent, and would drown every other pair's signal in raw gains
                g = ((_ranks(fit)[:, 0] - _ranks(fit)[:, 1])[:, None] * eps).sum(axis=0) / (2 * cfg.pairs * cfg.sigma)
                # Adam, ascending the gain
                b1, b2 = 0.9, 0.999
                state.m = b1 * state.m + (1 - b1) * g
                state.v = b2 * state.v + (1 - b2) * g * g
                step = cfg.lr * (state.m / (1 - b1**k)) / (np.sqrt(state.v / (1 - b2**k)) + 1e-8)
                state.theta = state.theta + step
            state.iteration = k
            mean_gain = gains.mean(axis=2)
            row: dict[str, Any] = {"iteration": k, "train_gain_pct": float(mean_gain.mean()),
                                   "pair_spread_pct": float(np.abs(mean_gain[:, 0] - mean_gain[:, 1]).mean()),
                                   "theta_norm": float(np.linalg.norm(state.theta)), "held_back_gain_pct": None,
                                   "held_back_gain_ci95": None}
            if k % cfg.eval_every == 0 or k == cfg.iterations:
                held_back_gain(k, row)
            dt = time.perf_counter() - t0
            state.elapsed_s += dt
            row["wall_s"] = state.elapsed_s
            row["steps_per_s"] = steps[0] / dt
            row["episodes"] = k * (len(seeds) * (1 + 2 * cfg.pairs))
            record(row)
    if state.curve:  # (again: a finished run given --resume renders its curve)
        _write_curve(out / "curve.csv", state.curve)
        plot_curve(state.curve, out / "curve.png", f"{', '.join(cases)}: {cfg.method.upper()} on the "
                   f"{' and '.join(learn)}, held-back seeds "
                   f"{cfg.held_back[0]}-{cfg.held_back[-1]}")
    return state


def learned_parts(ck: dict[str, Any], source: str = "checkpoint") -> dict[str, np.ndarray | None]:
    """Each part of ``PARTS`` a loaded checkpoint carries, validated (None: it has none)."""
    from hrlsched.agent.placement_choice import placement_weights
    from hrlsched.agent.residual import residual_weights
    from hrlsched.agent.selector import selector_weights

    return {"residual": residual_weights(ck, source), "selector": selector_weights(ck, source),
            "placement": placement_weights(ck, source)}


def _start(base_ck: dict[str, Any], learn: tuple[str, ...], source: str) -> np.ndarray:
    """The first weights: each learned part's from the starting checkpoint
    where it has that part (a run goes on from an earlier one's agent), 0
    otherwise (the rules)."""
    have = learned_parts(base_ck, source)
    return np.concatenate([np.zeros(PARTS[p]) if have[p] is None else np.ravel(have[p]) for p in learn])


def _save_agent(base_ck: dict[str, Any], theta: np.ndarray, path: Path, cfg: ESConfig, iteration: int,
                gain: float, source: str = "checkpoint") -> None:
    import torch

    from hrlsched.agent.common import checkpoint as common

    ck = {k: v for k, v in base_ck.items() if k in ("net", "state_dict", "part", "schema", "env_kwargs")}
    if cfg.placement is not None:  # the rules it was trained with
        ck["env_kwargs"] = {**ck["env_kwargs"], "placement": cfg.placement}
    sd = dict(ck["state_dict"])
    sd[LAYER] = torch.zeros_like(sd[LAYER])
    sd["cand.2.bias"] = torch.zeros_like(sd["cand.2.bias"])
    ck["state_dict"] = sd
    parts = learned_parts(base_ck, source)  # the parts not learned are the starting checkpoint's
    parts.update(split(tuple(cfg.learn), theta))
    ck = with_placement(with_selector(with_residual(ck, parts["residual"]), parts["selector"]), parts["placement"])
    ck["config"] = {**asdict(cfg), "overrides": list(cfg.overrides), "held_back": list(cfg.held_back),
                    "learn": list(cfg.learn), "cases": list(cfg.cases)}
    if cfg.cases:  # the cases name the workloads; scenario and overrides were not used
        del ck["config"]["scenario"], ck["config"]["overrides"]
    # where the rules and the encoders came from: the starting checkpoint's record (its hint's tuning)
    ck["init"] = {k: base_ck[k] for k in ("config", "tune", "hint_gap_weight", "init") if k in base_ck}
    ck["iteration"] = iteration
    ck["best_jct_s"] = None
    ck["es_held_back_gain_pct"] = gain
    common.save(path, ck)


def _save_state(path: Path, state: ESState, cfg_text: str) -> None:
    from hrlsched.agent.common import checkpoint as common

    common.save(path, {"kind": "es-state", "config_text": cfg_text, **asdict(state)})


def _load_state(path: Path, cfg_text: str) -> ESState:
    from hrlsched.agent.common import checkpoint as common

    if not path.is_file():
        raise ValueError(f"--resume: no {path} to resume from")
    d = common.read(path)
    if d.get("config_text") != cfg_text:
        raise ValueError(f"--resume: {path} was made with other settings (config.yaml beside it; only "
                         "--iterations and --workers may change); give the same ones, or another --out")
    for k in ("kind", "config_text", "format"):
        d.pop(k, None)
    d["rules_held"] = {str(k): float(v) for k, v in d["rules_held"].items()}
    return ESState(**d)


def _write_curve(path: Path, curve: list[dict[str, Any]]) -> None:
    from hrlsched.io import write_text

    cols = ["iteration", "episodes", "wall_s", "steps_per_s", "train_gain_pct", "pair_spread_pct", "theta_norm",
            "held_back_gain_pct", "held_back_gain_ci95", "held_back_worst_case", "held_back_worst_case_pct",
            "held_back_worst_loss_pct"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in curve:
        w.writerow(["" if r.get(c) is None else (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in cols])
    write_text(path, buf.getvalue())


def plot_curve(curve: list[dict[str, Any]], path: Path, title: str) -> None:
    """The gain over the rules against wall time: held-back (with its 95%
    interval) and on each iteration's training workloads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hrlsched.io import atomic_write

    fig, ax = plt.subplots(figsize=(7, 3.8))
    trained = [(r["wall_s"] / 60, r["train_gain_pct"]) for r in curve if r["train_gain_pct"] is not None]
    if trained:
        ax.plot(*zip(*trained), "o-", color="C1", alpha=0.6, label="training workloads (perturbed agents, mean)")
    held = [(r["wall_s"] / 60, r["held_back_gain_pct"], r["held_back_gain_ci95"] or 0.0) for r in curve
            if r["held_back_gain_pct"] is not None]
    if curve and curve[0]["iteration"] != 0:  # a run from the rules starts at them
        held.insert(0, (0.0, 0.0, 0.0))
    if held:
        x, y, e = zip(*held)
        ax.errorbar(x, y, yerr=e, fmt="s-", color="C0", capsize=3, label="held-back seeds (the agent), 95% interval")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("wall time (min)")
    ax.set_ylabel("gain in average JCT over the rules (%)")
    import textwrap

    ax.set_title("\n".join(textwrap.wrap(title, 80)), fontsize=10)  # several cases make a long title
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None}))
    plt.close(fig)
