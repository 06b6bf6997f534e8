"""Why two levels (docs/hierarchy.md): the size of one flat joint action
space against the two levels' at real decision points, and a flat agent
(``hrlsched/Flat-v0``) trained with the same PPO and budget as the
hierarchical one (``hrlsched/Hierarchical-v0``), both curves on one plot.

Sizes (``point_sizes``): ``Hierarchical-v0`` is run to the end of a
workload with the behaviour-cloning teacher acting (``agent.experts``:
``optimus`` allocates, ``pack`` places), and at every decision point where
the agent is asked, from the environment's own masks:

- the flat joint space (``joint_log10``): every job decided at the point
  gets a set of GPUs for its workers (the empty set: it waits) among the
  GPUs the point can give (free, or held by its running jobs, which may
  keep them), at most one worker per GPU and the menu's largest count
  (32) per job; counted exactly (``joint_workers``). The PSs' sockets and
  the open architectures and modes are left out, so it is a lower bound
  of the joint space;
- level 1: the allocation choices of the point (one per job asked) and
  their valid slots (<= the menu's 38);
- level 2: the placement choices (one per task) and their valid GPUs or
  sockets.

Per step is the largest choice of the point; per point the product of the
choices along the path taken (sum of log10), which counts the action
sequences the levels can take at that point along that path.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hrlsched.envs.candidates import WORKER_OPTIONS

LN10 = math.log(10.0)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):  # log 0 = -inf: no way at all
        return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def joint_workers(jobs: int, gpus: int, cap: int) -> float:
    """log10 of the number of ways to give each of ``gpus`` GPUs to one of
    ``jobs`` jobs or to none, at most ``cap`` per job (one worker per GPU):
    sum over k of C(gpus, k) a_J(k), a_J(k) the ways to split k given GPUs
    among the J jobs, a_{j+1}(k) = sum_{n <= cap} C(k, n) a_j(k - n)
    (computed in logs)."""
    if jobs < 0 or gpus < 0 or cap < 0:
        raise ValueError(f"joint_workers: expected counts >= 0, got jobs={jobs}, gpus={gpus}, cap={cap}")
    from scipy.special import gammaln

    k = np.arange(gpus + 1)
    lf = gammaln(np.arange(gpus + 1, dtype=float) + 1.0)  # log k!
    n = np.arange(min(cap, gpus) + 1)
    # log C(k, n) for every (k, n), -inf where n > k
    kk, nn = np.meshgrid(k, n, indexing="ij")
    logc = np.where(nn <= kk, lf[kk] - lf[nn] - lf[np.maximum(kk - nn, 0)], -np.inf)
    a = np.full(gpus + 1, -np.inf)
    a[0] = 0.0
    for _ in range(jobs):
        prev = np.where(kk - nn >= 0, a[np.maximum(kk - nn, 0)], -np.inf)
        a = _logsumexp(logc + prev, axis=1)
    total = _logsumexp(lf[gpus] - lf[k] - lf[gpus - k] + a, axis=0)
    return float(total) / LN10


@dataclass(frozen=True)
class PointSize:
    """One decision point's counts (see the module)."""

    time_s: float
    jobs: int  # jobs decided at the point (active, at most max_jobs)
    free_gpus: int  # GPUs with no task
    open_gpus: int  # free, or held by a running job of the point
    joint_log10: float  # the flat joint space (workers only)
    l1_steps: int
    l1_max: int  # the largest allocation choice (valid slots)
    l1_log10: float  # sum of log10 of the allocation choices
    l2_steps: int
    l2_max: int  # the largest placement choice (valid GPUs or sockets)
    l2_log10: float


def point_sizes(scenario: str, overrides: Sequence[str] = (), seed: int = 100, teacher: str = "optimus",
                max_decisions: int | None = None) -> list[PointSize]:
    """The counts at each decision point where ``Hierarchical-v0`` asks the
    agent, on workload ``seed`` of ``scenario``, the ``teacher`` allocation
    (and ``pack``) acting; ``max_decisions``: stop after that many points."""
    import gymnasium as gym

    import hrlsched.envs  # noqa: F401  (registers the environments)
    from hrlsched.agent.experts import Teacher
    from hrlsched.envs.decision import ALLOCATE

    env = gym.make("hrlsched/Hierarchical-v0", scenario=scenario, seeds=[seed], overrides=list(overrides),
                   hint="p=none", max_decisions=max_decisions).unwrapped
    cap = max(WORKER_OPTIONS)
    t = Teacher(teacher)
    _, info = env.reset(seed=seed)
    t.reset(env)
    out: list[PointSize] = []
    cur: dict[str, Any] | None = None
    memo: dict[tuple[int, int], float] = {}

    def close(c: dict[str, Any] | None) -> None:
        if c is None:
            return
        key = (c["jobs"], c["open_gpus"])
        if key not in memo:
            memo[key] = joint_workers(c["jobs"], c["open_gpus"], cap)
        out.append(PointSize(c["time_s"], c["jobs"], c["free_gpus"], c["open_gpus"], memo[key], len(c["l1"]),
                             max(c["l1"], default=0), float(np.log10(c["l1"]).sum()) if c["l1"] else 0.0,
                             len(c["l2"]), max(c["l2"], default=0),
                             float(np.log10(c["l2"]).sum()) if c["l2"] else 0.0))

    done = False
    while not done:
        dp = env.dp
        if cur is None or cur["point"] != dp.decisions:
            close(cur)
            view = dp.view
            n = dp.n_dec
            held = sum(len(pl.gpus) for pl in view.placements[:n] if pl is not None)
            free = int(np.count_nonzero(view.gpu_tasks == 0))
            cur = {"point": dp.decisions, "time_s": float(view.time_s), "jobs": n, "free_gpus": free,
                   "open_gpus": free + held, "l1": [], "l2": []}
        valid = int(np.count_nonzero(info["action_mask"]))
        cur["l1" if dp.phase == ALLOCATE else "l2"].append(valid)
        _, _, te, tr, info = env.step(t.action(env))
        done = te or tr
    close(cur)
    return out


def pick(points: Sequence[PointSize]) -> dict[str, PointSize]:
    """The median point (by jobs decided, then by GPUs open) and the
    largest (by the flat joint space)."""
    if not points:
        raise ValueError("pick: no decision point where the agent is asked")
    order = sorted(points, key=lambda p: (p.jobs, p.open_gpus, p.time_s))
    return {"median": order[(len(order) - 1) // 2], "largest": max(points, key=lambda p: (p.joint_log10, p.jobs))}


def sizes_markdown(cases: Sequence[tuple[str, str, list[PointSize], float]], gpus: dict[str, tuple[int, int]]) -> str:
    """The sizes table: per case (label, scenario text, its points, seconds
    it took) the median and largest points; ``gpus``: per label (GPUs,
    sockets) of its cluster."""
    lines = ["| case | point | time (h) | jobs | free GPUs | GPUs open | flat joint, one step: log10 | "
             "level 1: steps, largest, log10/point | level 2: steps, largest, log10/point | "
             "two levels: log10/point, largest step |",
             "|---|---|---:|---:|---:|---:|---:|---|---|---|"]
    for label, _, pts, _ in cases:
        for name, p in pick(pts).items():
            lines.append(
                f"| {label} | {name} | {p.time_s / 3600:.2f} | {p.jobs} | {p.free_gpus} | {p.open_gpus} | "
                f"{p.joint_log10:,.1f} | {p.l1_steps}, {p.l1_max}, {p.l1_log10:.1f} | "
                f"{p.l2_steps}, {p.l2_max}, {p.l2_log10:.1f} | {p.l1_log10 + p.l2_log10:.1f}, "
                f"{max(p.l1_max, p.l2_max)} (log10 {math.log10(max(p.l1_max, p.l2_max, 1)):.2f}) |")
    lines.append("")
    lines.append("| case | cluster | points asked | flat joint log10: median, largest | level 1 largest step | "
                 "level 2 largest step (of GPUs + sockets) | Flat-v0 largest step | s |")
    lines.append("|---|---|---:|---|---:|---:|---:|---:|")
    for label, text, pts, secs in cases:
        g, s = gpus[label]
        j = sorted(p.joint_log10 for p in pts)
        l2 = max(p.l2_max for p in pts)
        lines.append(f"| {label} | `{text}`: {g} GPUs, {s} sockets | {len(pts)} | {j[(len(j) - 1) // 2]:,.1f}, "
                     f"{j[-1]:,.1f} | {max(p.l1_max for p in pts)} | {l2} (of {g + s}) | {l2 + 1} (of {g + s + 1}) | "
                     f"{secs:.0f} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------- the training
AGENTS = {"flat": "flat", "hierarchical": "both"}  # run name -> TrainConfig.level


def train_config(level: str, scenario: str, overrides: Sequence[str], steps: int, seed: int, train_seeds: Sequence[int],
                 valid_seeds: Sequence[int], eval_every_min: float) -> Any:
    """The training run of one agent: the project's PPO from scratch (no
    behaviour cloning: no teacher acts in Flat-v0's layout), no hint, the
    default network, PPO settings and curriculum, ``steps`` environment
    steps, rollouts in the trainer's process."""
    from hrlsched.agent.train import TrainConfig

    return TrainConfig(scenario=scenario, overrides=list(overrides), level=level, steps=int(steps), minutes=None,
                       seed=int(seed), workers=0, train_seeds=[int(s) for s in train_seeds],
                       valid_seeds=[int(s) for s in valid_seeds], bc_episodes=0, hint="p=none",
                       eval_every_min=float(eval_every_min), checkpoint_every_min=float(eval_every_min))


def train(out: Path, cfg: Any, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train ``cfg`` in ``out`` (continued where a run of the same settings
    stopped, ``--resume``), then write ``final.json`` (environment steps,
    training wall time, the final weights' held-back avg JCT); a run whose
    ``final.json`` has the budget is read back, not run again."""
    from hrlsched.agent.common.training_run import read_config, write_config
    from hrlsched.agent.train import TrainConfig, Trainer
    from hrlsched.io import write_json

    out = Path(out)
    final = out / "final.json"
    resume = (out / "config.yaml").is_file() and (out / "last.pt").is_file()
    if resume:
        have = dataclasses.asdict(read_config(out, TrainConfig))
        want = dataclasses.asdict(cfg)
        diff = sorted(k for k in want if k not in ("steps", "minutes") and have.get(k) != want[k])
        if diff:
            raise ValueError(f"{out}: a training run with other settings ({', '.join(diff)}); use another --out")
        if final.is_file():
            res = json.loads(final.read_text())
            if res["env_steps"] >= cfg.steps:
                return res
    elif out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: not empty and not a training run of this command; use another --out")
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        write_config(out, cfg)
    res = Trainer(cfg, out, resume=resume, log=log).run()
    row = {"env_steps": int(res["env_steps"]), "wall_s": float(res["elapsed_s"]),
           "valid_avg_jct_h": float(res["final_valid_avg_jct_h"]), "iterations": int(res["iterations"])}
    write_json(final, row)
    return row


def curve(run: Path) -> list[dict[str, float]]:
    """A run's held-back evaluations (``metrics.csv``) and its final one (``final.json``)."""
    rows = []
    with open(Path(run) / "metrics.csv") as fh:
        for r in csv.DictReader(fh):
            v = r.get("valid_avg_jct_h", "")
            if v not in ("", "nan"):
                rows.append({"env_steps": float(r["env_steps"]), "wall_s": float(r["wall_s"]),
                             "valid_avg_jct_h": float(v)})
    fin = Path(run) / "final.json"
    if fin.is_file():
        f = json.loads(fin.read_text())
        rows.append({"env_steps": float(f["env_steps"]), "wall_s": float(f["wall_s"]),
                     "valid_avg_jct_h": float(f["valid_avg_jct_h"])})
    return rows


def greedy_waits(run: Path, seed: int) -> tuple[int, float]:
    """The final weights' greedy episode on held-back workload ``seed``: its
    steps and the share of them that make a job wait (Flat-v0: *stop*
    before any worker; Hierarchical-v0: the *wait* slot)."""
    from hrlsched.agent import checkpoint as ckpt
    from hrlsched.agent.rollout import RolloutSpec
    from hrlsched.agent.rollout import run as rollout
    from hrlsched.envs.candidates import WAIT

    ck = ckpt.load(Path(run) / "last.pt")
    part = ck["part"]
    tr = rollout(RolloutSpec(part, ck["env_kwargs"], int(seed), [0], net_config=ck["net"], state_dict=ck["state_dict"],
                             act="greedy", values=False))[0]
    if part == "flat":  # stop (the last action) where the action before it placed no worker: the job waits
        stop, gpus = int(tr.obs["action_mask"].shape[1]) - 1, int(tr.obs["gpu_mask"].shape[1])
        new_point = np.r_[True, tr.points[1:] != tr.points[:-1]]
        after_worker = np.r_[False, tr.actions[:-1] < gpus] & ~new_point
        waits = int(np.count_nonzero((tr.actions == stop) & ~after_worker))
    else:
        waits = int(np.count_nonzero(tr.actions == WAIT))
    return tr.steps, waits / max(tr.steps, 1)


def heuristic_jct_h(policy: str, scenario: str, overrides: Sequence[str], seeds: Sequence[int]) -> float:
    """``policy``'s mean avg JCT (h) over ``seeds``."""
    from hrlsched.config import resolve_run_config
    from hrlsched.run import simulate
    from hrlsched.sim.metrics import summary

    return float(np.mean([summary(simulate(resolve_run_config(scenario, policy, s, list(overrides))), policy,
                                  scenario)["avg_jct_s"] for s in seeds])) / 3600


def write_curves(out: Path, curves: dict[str, list[dict[str, float]]], refs: dict[str, float], title: str) -> Path:
    """``curves.csv`` and ``curves.png`` in ``out`` (written whole): each
    agent's held-back avg JCT against environment steps and against wall
    time, the heuristics as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hrlsched.io import atomic_write, write_text

    lines = ["agent,env_steps,wall_s,valid_avg_jct_h," + ",".join(f"{p}_avg_jct_h" for p in refs)]
    for name, rows in curves.items():
        lines += [f"{name},{r['env_steps']:.0f},{r['wall_s']:.1f},{r['valid_avg_jct_h']:.4f},"
                  + ",".join(f"{v:.4f}" for v in refs.values()) for r in rows]
    write_text(out / "curves.csv", "\n".join(lines) + "\n")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, x, label in ((axes[0], "env_steps", "environment steps"), (axes[1], "wall_s", "training wall time (min)")):
        for name, rows in curves.items():
            xs = [r[x] / (60 if x == "wall_s" else 1) for r in rows]
            ax.plot(xs, [r["valid_avg_jct_h"] for r in rows], marker="o", label=f"{name} (PPO, greedy)")
        for i, (p, v) in enumerate(refs.items()):
            ax.axhline(v, color="k", ls=("--", ":", "-.")[i % 3], lw=1, label=p)
        ax.set_xlabel(label)
    axes[0].set_ylabel("held-back avg JCT (h)")
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    atomic_write(out / "curves.png", lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
    return out / "curves.png"


def curves_markdown(curves: dict[str, list[dict[str, float]]], refs: dict[str, float],
                    params: dict[str, int], waits: dict[str, tuple[int, float]]) -> str:
    """The curves' table: per agent its first and last evaluation, the best,
    its wall time, the gain of its last over each heuristic, and ``waits``
    (``greedy_waits``)."""
    ref_cols = "".join(f" | last vs {p}" for p in refs)
    lines = [f"| agent | parameters | env steps | wall time (min) | held-back avg JCT (h): start, last, best{ref_cols} "
             "| greedy episode on the first held-back seed: steps, share that make a job wait |",
             "|---|---:|---:|---:|---|" + "---:|" * len(refs) + "---|"]
    for name, rows in curves.items():
        if not rows:
            continue
        first, last = rows[0], rows[-1]
        best = min(r["valid_avg_jct_h"] for r in rows)
        gains = "".join(f" | {100 * (v - last['valid_avg_jct_h']) / v:+.1f}%" for v in refs.values())
        lines.append(f"| {name} | {params.get(name, 0):,} | {last['env_steps']:,.0f} | {last['wall_s'] / 60:.1f} | "
                     f"{first['valid_avg_jct_h']:.3f}, {last['valid_avg_jct_h']:.3f}, {best:.3f}{gains} | "
                     f"{waits[name][0]}, {100 * waits[name][1]:.0f}% |")
    lines.append("")
    lines.append("Heuristics on the same held-back seeds: " + ", ".join(f"{p} {v:.3f} h" for p, v in refs.items())
                 + ". Gain: (heuristic - agent) / heuristic; positive: the agent is faster.")
    return "\n".join(lines) + "\n"


def n_parameters(level: str) -> int:
    """Parameters of the default network of ``level`` (``train``'s)."""
    from hrlsched.agent.nets import HRLNet, NetConfig, count_parameters

    return count_parameters(HRLNet(NetConfig(), allocates=level in ("1", "both"), places=level != "1"))


def cluster_size(scenario: str, overrides: Sequence[str]) -> tuple[int, int]:
    """(GPUs, sockets) of the scenario's cluster."""
    from hrlsched.envs import WorkloadPool

    topo = WorkloadPool(scenario, [100], list(overrides)).built(100).topology
    return int(topo.n_gpus), int(topo.n_sockets)


def timed_sizes(scenario: str, overrides: Sequence[str], seed: int, teacher: str,
                max_decisions: int | None) -> tuple[list[PointSize], float]:
    t0 = time.time()
    pts = point_sizes(scenario, overrides, seed, teacher, max_decisions)
    return pts, time.time() - t0


# ------------------------------------------------------------- the command
def parse_case(text: str) -> tuple[str, list[str], int | None]:
    """``large@cluster.server_groups.0.count=128#400`` -> (scenario,
    overrides, count only the first N decision points or None)."""
    body, sep, first = text.partition("#")
    name, *over = body.split("@")
    expected = "expected SCENARIO[@key=value...][#N], e.g. large@cluster.server_groups.0.count=128#400"
    if not name or any("=" not in o for o in over) or (sep and not first.isdigit()):
        raise ValueError(f"--size-case {text!r}: {expected}")
    return name, over, int(first) if sep else None


def hierarchy(out: Path, size_cases: Sequence[str], size_seed: int, teacher: str, scenario: str, overrides: Sequence[str], train_steps: int | None, seed: int,
              train_seeds: Sequence[int], valid_seeds: Sequence[int], eval_every_min: float,
              heuristics: Sequence[str], log: Callable[[str], None] = print) -> str:
    """Everything the page shows, as markdown, with its files in ``out``:
    the sizes of ``size_cases`` (``sizes.json``: a case counted before with
    the same seed and teacher is read back), and, where ``out/flat`` and
    ``out/hierarchical`` hold training runs (``train_steps``: trained, or
    continued, to that many environment steps first), both curves
    (``curves.csv``, ``curves.png``) against ``heuristics`` on the held-back
    seeds."""
    from hrlsched.io import write_json, write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parts: list[str] = []
    if size_cases:
        cases, gpus = [], {}
        known = json.loads((out / "sizes.json").read_text()) if (out / "sizes.json").is_file() else {}
        for text in size_cases:
            sc, over, first = parse_case(text)
            key = f"{text} seed={size_seed} teacher={teacher}"
            if key not in known:
                log(f"sizes: {text} (seed {size_seed}, {teacher}+pack acting)")
                pts, secs = timed_sizes(sc, over, size_seed, teacher, first)
                known[key] = {"seconds": secs, "points": [dataclasses.asdict(p) for p in pts]}
                write_json(out / "sizes.json", known)
            pts = [PointSize(**p) for p in known[key]["points"]]
            cases.append((text, text, pts, float(known[key]["seconds"])))
            gpus[text] = cluster_size(sc, over)
        parts += [f"### Action-space sizes (workload seed {size_seed}, `{teacher}` allocating and `pack` placing in "
                  "Hierarchical-v0; `#N`: the first N decision points only)", "", sizes_markdown(cases, gpus)]
    runs = {name: out / name for name in AGENTS}
    if train_steps is not None:
        for name, level in AGENTS.items():
            log(f"training {name} ({level}) to {train_steps} environment steps in {runs[name]}")
            train(runs[name], train_config(level, scenario, overrides, train_steps, seed, train_seeds, valid_seeds,
                                           eval_every_min), log)
    if all((r / "metrics.csv").is_file() for r in runs.values()):
        curves = {name: curve(r) for name, r in runs.items()}
        refs = {p: heuristic_jct_h(p, scenario, overrides, valid_seeds) for p in heuristics}
        text = f"{scenario}" + (f" ({', '.join(overrides)})" if overrides else "")
        write_curves(out, curves, refs, f"PPO from scratch, {text}; held-back seeds "
                                        f"{valid_seeds[0]}-{valid_seeds[-1]}")
        parts += [f"### Learning curves: `{text}`, held-back seeds {valid_seeds[0]}-{valid_seeds[-1]}", "",
                  curves_markdown(curves, refs, {n: n_parameters(lv) for n, lv in AGENTS.items()},
                                  {n: greedy_waits(r, valid_seeds[0]) for n, r in runs.items()}),
                  "![curves](hierarchy-curves.png)", "", "Data: [hierarchy-curves.csv](hierarchy-curves.csv).", ""]
    body = "\n".join(parts)
    write_text(out / "summary.md", body)
    return body


def write_page(page: Path, out: Path, body: str, command: str) -> Path:
    """``page`` with, below the mark, the command and ``body`` (what an
    earlier run put there replaced; the reading above the mark kept), and
    the curves' plot and CSV of ``out`` copied beside it."""
    import shutil

    from hrlsched.experiments.experiment import DOCS_MARK
    from hrlsched.io import atomic_write, write_text

    page = Path(page)
    for name in ("curves.png", "curves.csv"):
        if (Path(out) / name).is_file():
            atomic_write(page.parent / f"hierarchy-{name}",
                         lambda tmp, src=Path(out) / name: shutil.copyfile(src, tmp))
    head = page.read_text().split(DOCS_MARK)[0] if page.is_file() else "# Why two levels\n\n"
    return write_text(page, head + f"{DOCS_MARK}{command} (below: its output, rewritten by that command) -->\n\n"
                      f"Made by `{command}`.\n\n{body}")
