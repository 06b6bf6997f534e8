"""``lookahead``: a rollout planner over the rules, to measure how much room
single decisions leave (``docs/headroom.md``) and to teach the agent.

At a decision point it copies the running simulation (``Simulation.clone``),
applies each of a few alternative decisions to a copy, runs every copy on
with a rollout policy (by default the rules, ``optimus-tuned``) to the end
of the episode (or ``horizon_s``), and keeps the decision whose copy
accumulates the fewest job-seconds from here on, which, all copies sharing
the past, is the lowest average JCT. It is one step of policy iteration on
its rollout policy (Bertsekas' rollout algorithm): it never does worse than
the rollout policy at the points it evaluates, up to the
points where the two part. It knows the future arrivals and the true speeds:
an oracle (``sees_future``), a bound on what decisions of this kind can
gain, not a scheduler a cluster could run.

``futures=k`` takes the arrivals away from it: each decision is rolled out
on k futures drawn from the scenario's workload (the jobs of another seed
that arrive after now, ``Simulation.with_future``; the same k for every
alternative at a point) and scored by the mean. Their number is drawn too:
about N(D - t)/D at time t of a workload of N jobs over D, where N less
those arrived are really left (the same on average). It still reads the true
work and speeds of the jobs already there, and knows the workload's
distribution, as an operator knows it from history. The gap between the two
is the part of the room that needs the arrivals, which no scheduler has.

``observe=1`` changes nothing: it follows the base decision (the rules')
everywhere and only records each evaluated point, so that every point is
one state of the rules' own run; with ``futures=k`` each alternative's
value on the real arrivals is recorded too (one more rollout each). At the
same points it then tells what the best alternative gains knowing the
arrivals, and what the one chosen on sampled futures gains on them
(``hrlsched headroom``): the room that needs the arrivals, point by point,
without two runs that part ways.

The alternatives (``LookaheadConfig``):

- level 1 (``allocation``): the rules' decision with one job's menu slot
  changed (``targets`` newest jobs with a choice at the point): held
  (*wait*), its workers scaled by each of ``resize`` (same architecture and
  mode where the menu has it), each other architecture or mode at its worker
  count; the jobs after it follow the rules on what is left. Also the whole
  decisions of other ``policies`` at this point.
- level 2 (``placement``): the rules' allocation placed by each of
  ``placements`` instead of ``pack`` (``topology`` scores the predicted
  interference of its candidates, so it is the variant that avoids loaded
  links and sockets).
- ``both``: all of them.

``every``: only about one decision point in k is evaluated (by a hash of
its round; the others follow the rules), which divides its time. ``place``: the placement
of the rules it starts from and rolls out with (``pack``: ``optimus-tuned``;
``migrate``: ``optimus-tuned+migrate``, the rules of an agent placed so).
``depth``
2 is the iterated lookahead: it follows the depth-1 lookahead and improves
on it with rollouts that run the depth-1 lookahead (policy iteration's
second step; its time is about the square of depth 1's).

Settings are written as text, ``level=allocation/every=4`` (``parse``), and
name a policy as ``lookahead/level=allocation/every=4`` wherever a policy
is named (``hrlsched compare``, ``evaluate --lookahead``, ``headroom``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hrlsched.agent.rules import Choice, RulesScheduler
from hrlsched.agent.selector import point_features
from hrlsched.cluster.topology import Topology
from hrlsched.contract import ARCHS, MODES, ClusterView, Decision, Scheduler
from hrlsched.envs.candidates import KEEP, WAIT
from hrlsched.policies.goodput_batch import with_batch_rule

LEVELS = ("allocation", "placement", "both")


@dataclass(frozen=True)
class LookaheadConfig:
    """The lookahead's settings (text form: ``key=value`` joined by ``/``)."""

    level: str = "both"  # which alternatives: allocation (level 1), placement (level 2) or both
    every: int = 1  # evaluate about one decision point in k (by its round); the others follow the rules
    horizon_s: float | None = None  # None: roll to the end of the episode
    targets: int = 1  # level 1: how many of the newest jobs with a choice get alternatives
    resize: tuple[float, ...] = (0.5, 2.0)  # level 1: worker-count factors tried
    policies: tuple[str, ...] = ("srtf+pack", "drf+pack", "optimus+pack")  # level 1: whole decisions tried
    placements: tuple[str, ...] = ("balance", "topology")  # level 2: placements tried for the rules' allocation
    depth: int = 1  # 2: rollouts run a depth-1 lookahead (iterated)
    place: str = "pack"  # the placement of the rules it improves on and rolls out with (an agent's rules: its own)
    futures: int = 0  # 0: roll out on the real arrivals; k: on k futures sampled from the scenario's workload
    observe: int = 0  # 1: follow the base decision everywhere, only record (with futures, the real values too)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"lookahead level: expected one of {', '.join(LEVELS)}, got {self.level!r}")
        if int(self.every) < 1:
            raise ValueError(f"lookahead every: expected a positive number of decision points, got {self.every}")
        if self.horizon_s is not None and not self.horizon_s > 0:
            raise ValueError(f"lookahead horizon_s: expected seconds > 0 or none, got {self.horizon_s}")
        if int(self.targets) < 0:
            raise ValueError(f"lookahead targets: expected a number of jobs >= 0, got {self.targets}")
        if any(not f > 0 or f == 1 for f in self.resize):
            raise ValueError(f"lookahead resize: expected factors > 0 other than 1, got {self.resize}")
        if self.observe not in (0, 1):
            raise ValueError(f"lookahead observe: expected 0 or 1, got {self.observe}")
        if int(self.futures) < 0:
            raise ValueError(f"lookahead futures: expected a number of sampled futures >= 0, got {self.futures}")
        if self.depth not in (1, 2):
            raise ValueError(f"lookahead depth: expected 1 or 2 (iterated), got {self.depth}")
        from hrlsched.policies.registry import PLACEMENTS, make_scheduler

        for p in self.policies:
            make_scheduler(p)  # a bad name fails here, naming it
        if self.place not in PLACEMENTS:
            raise ValueError(f"lookahead place: unknown {self.place!r}; expected one of {sorted(PLACEMENTS)}")
        bad = [p for p in self.placements if p not in PLACEMENTS]
        if bad:
            raise ValueError(f"lookahead placements: unknown {bad}; expected some of {sorted(PLACEMENTS)}")

    @classmethod
    def parse(cls, text: str) -> LookaheadConfig:
        """``level=allocation/every=4/resize=0.5:2/policies=srtf+pack:drf+pack/horizon_s=none``
        (lists joined by ``:``; empty text: the defaults). After ``policies=``,
        a ``key=value`` whose key is not a lookahead setting belongs to the
        policy before it (``policies=optimus+pack:optimus-tuned+migrate/f=0``)."""
        kw: dict[str, Any] = {}
        names = {f.name for f in dataclasses.fields(cls)}
        for part in cls.parts(text):
            key, eq, val = part.partition("=")
            if not eq or key not in names:
                raise ValueError(f"lookahead setting {part!r}: expected key=value with a key among {sorted(names)}")
            kw[key] = _value(key, val)
        return cls(**kw)

    @classmethod
    def parts(cls, text: str) -> list[str]:
        """The ``key=value`` settings of ``text``, a policy's own settings
        kept with it (``parse``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        out: list[str] = []
        for part in filter(None, text.split("/")):
            key, eq, _ = part.partition("=")
            if eq and key not in names and out and out[-1].startswith("policies="):
                out[-1] += "/" + part  # a policy's own settings: policies=optimus-tuned+migrate/f=0
            else:
                out.append(part)
        return out

    def text(self) -> str:
        """The settings that differ from the defaults, as ``parse`` reads them."""
        out = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v != f.default:
                shown = ":".join(_fmt(x) for x in v) if isinstance(v, tuple) else _fmt(v)
                out.append(f"{f.name}={shown}")
        return "/".join(out)


def _fmt(v: object) -> str:
    if v is None:
        return "none"
    if isinstance(v, float) and v == int(v):
        return str(int(v)) if v >= 10 else f"{v:g}"
    return str(v)


def _value(key: str, val: str) -> Any:
    try:
        if key in ("level", "place"):
            return val
        if key in ("every", "targets", "depth", "futures", "observe"):
            return int(val)
        if key == "horizon_s":
            return None if val.lower() == "none" else float(val)
        if key == "resize":
            return tuple(float(x) for x in filter(None, val.split(":")))
        return tuple(filter(None, val.split(":")))  # policies, placements
    except ValueError:
        raise ValueError(f"lookahead setting {key}={val!r}: not a valid value") from None


def beats(v: float, ref: float) -> bool:
    """Whether job-seconds ``v`` are strictly fewer than ``ref`` (beyond
    rounding): the lookahead takes an alternative only then."""
    return v < ref - 1e-6 * max(1.0, abs(ref))


def _signature(d: Decision) -> tuple[Any, ...]:
    """What a decision changes in the cluster (two equal ones give the same run)."""
    return (tuple(sorted((j, p.gpus, p.ps_sockets) for j, p in d.placements.items())),
            tuple(sorted(d.arch.items())), tuple(sorted(d.mode.items())), tuple(sorted(d.batch_sizes.items())))


@dataclass
class LookaheadStats:
    """What a run of the lookahead did (``LookaheadScheduler.stats``)."""

    points: int = 0  # decision points
    evaluated: int = 0  # of them, evaluated (every k-th with an alternative)
    rollouts: int = 0
    changed: int = 0  # evaluated points where an alternative beat the rules
    by_kind: dict[str, int] = field(default_factory=dict)  # the kinds of alternatives taken
    seconds: float = 0.0  # wall time spent deciding
    # each evaluated point: its time, active jobs, the selector's point features (``agent.selector``,
    # the base decision as the agent's own), the base decision's job-seconds from there, and each
    # alternative's [kind, job-seconds]: where the room is, point by point (``hrlsched headroom``'s points.csv)
    records: list[dict[str, Any]] = field(default_factory=list)


class LookaheadScheduler(Scheduler):
    """``lookahead``: see the module's docstring. ``config``: a
    ``LookaheadConfig`` or its text. The rollout policy and the rules it
    improves on are ``optimus-tuned`` with the shipped hint."""

    name = "lookahead"
    decision_points = "events"
    sees_future = True

    def __init__(self, config: LookaheadConfig | str | None = None) -> None:
        cfg = config if isinstance(config, LookaheadConfig) else LookaheadConfig.parse(config or "")
        self.config = cfg
        if cfg.text():
            self.name = f"lookahead/{cfg.text()}"
        self.rules = RulesScheduler(placement=cfg.place)
        self.reads_work = self.rules.reads_work
        self._alt_rules: dict[str, RulesScheduler] = {}
        self._others: dict[str, Scheduler] = {}
        self._roller: Scheduler | None = None
        self._sim: Any = None
        self._next_id = 0
        self.stats = LookaheadStats()

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        from hrlsched.policies.registry import make_scheduler

        cfg = self.config
        self.rules.reset(topology, np.random.default_rng(0))
        self._alt_rules = {}
        if cfg.level in ("placement", "both"):
            for p in cfg.placements:
                r = self._alt_rules[p] = RulesScheduler(placement=p)
                r.reset(topology, np.random.default_rng(0))
        self._others = {}
        if cfg.level in ("allocation", "both"):
            for p in cfg.policies:
                s = self._others[p] = make_scheduler(p)
                s.reset(topology, np.random.default_rng(0))
        if cfg.depth == 2:
            self._roller = LookaheadScheduler(dataclasses.replace(cfg, depth=1))
            self._roller.reset(topology, rng)
        else:
            self._roller = RulesScheduler(placement=cfg.place)
            self._roller.reset(topology, np.random.default_rng(0))
        self._next_id = 0
        self.stats = LookaheadStats()

    def bind(self, simulation: object) -> None:
        self._sim = simulation

    def decide(self, view: ClusterView) -> Decision:
        if self._sim is None:
            raise RuntimeError("lookahead: it plans on the running simulation; run it through Simulator "
                               "(hrlsched simulate, compare or evaluate), which binds it")
        t0 = time.perf_counter()
        st = self.stats
        st.points += 1
        trace: list[Choice] = []
        rules = self.rules.decide_with(view, trace=trace)
        base, extra = rules, []
        if isinstance(self._roller, LookaheadScheduler):  # iterated: improve on the depth-1 lookahead
            self._roller.bind(self._sim)
            base, extra = self._roller.decide(view), [("rules", rules)]
        if self._selected(view):
            alts = self._alternatives(view, base, trace, extra)
            if alts:
                st.evaluated += 1
                worlds = self._worlds()
                best, best_v, taken = base, self._rollout(base, worlds), None
                rec: dict[str, Any] = {"time_s": float(view.time_s), "jobs": len(view.jobs),
                                       "features": [float(x) for x in point_features(view, base)],
                                       "base": float(best_v), "alternatives": []}
                observe = bool(self.config.observe)
                real = observe and worlds[0] is not self._sim
                if real:  # what each decision gives on the arrivals that come: the choice's true worth
                    rec["base_real"], rec["real"] = self._rollout(base), []
                rec["jobs_read"] = [job for _, _, job in alts]  # the forced job's rows, or None
                for kind, d, _ in alts:
                    v = self._rollout(d, worlds)
                    rec["alternatives"].append([kind, float(v)])
                    if real:
                        rec["real"].append(self._rollout(d))
                    if beats(v, best_v):  # strictly better: ties keep the base
                        best, best_v, taken = d, v, kind
                st.records.append(rec)
                if observe:
                    taken, best = None, base
                if taken is not None:
                    st.changed += 1
                    st.by_kind[taken] = st.by_kind.get(taken, 0) + 1
                    if best.recheck_s is None and base.recheck_s is not None:
                        best = dataclasses.replace(best, recheck_s=base.recheck_s)
                base = best
        st.seconds += time.perf_counter() - t0
        return base

    def _selected(self, view: ClusterView) -> bool:
        """Whether this point is evaluated: about one in ``every``, chosen by
        a hash of its round, so that the choice is a function of the state
        (the rollout algorithm's improvement, and the iterated lookahead,
        need a policy that decides on the state alone)."""
        k = int(self.config.every)
        if k == 1:
            return True
        r = int(round(view.time_s / float(self._sim.cfg.round_s)))
        return (r * 2654435761 % (1 << 32)) % k == 0

    # ------------------------------------------------------------ internals
    def _alternatives(self, view: ClusterView, base: Decision, trace: list[Choice],
                      extra: list[tuple[str, Decision]]) -> list[tuple[str, Decision, dict[str, list[float]] | None]]:
        """(kind, decision, its job's rows or None) triples, distinct from
        ``base`` and from each other (``_forced`` for the rows)."""
        cfg = self.config
        seen = {_signature(base)}
        out: list[tuple[str, Decision, dict[str, list[float]] | None]] = []

        def add(kind: str, d: Decision, job: dict[str, list[float]] | None = None) -> None:
            s = _signature(d)
            if s not in seen:
                seen.add(s)
                out.append((kind, d, job))

        for kind, d in extra:
            add(kind, d)

        if cfg.level in ("allocation", "both"):
            for kind, force, job in self._forced(view, trace):
                add(kind, self.rules.decide_with(view, force=force), job)
            for p, s in self._others.items():
                # as the rules decide: at the own batches, then tuned (``hint.batch``; a table can lack
                # the per-GPU batch an allocation policy prices at a batch tuned for other counts)
                add(f"policy {p}", with_batch_rule(self.rules.batch, view, s.decide))
        if cfg.level in ("placement", "both"):
            for p, r in self._alt_rules.items():
                add(f"placement {p}", r.decide(view))
        return out

    def _forced(self, view: ClusterView,
                trace: list[Choice]) -> list[tuple[str, dict[int, int], dict[str, list[float]]]]:
        """Level-1 alternatives as forced menu slots of the newest jobs with a
        choice, each with what the agent's scorer reads of its job's choice:
        the candidate rows of the rules' slot and of the forced one and the
        cluster row (``Choice``), recorded for a learner of where such an
        alternative pays (``hrlsched headroom``)."""
        cfg = self.config
        if not cfg.targets:
            return []
        t = self.rules.dp.table  # type: ignore[union-attr]
        choices = [c for c in trace if len(c.valid) > 1]
        choices.sort(key=lambda c: -view.jobs[view.index(c.job_id)].arrival_s)
        out: list[tuple[str, dict[int, int], dict[str, list[float]]]] = []
        for c in choices[: cfg.targets]:
            k = view.index(c.job_id)
            pos = {int(s): i for i, s in enumerate(c.valid)}

            def job(slot: int, c: Choice = c, pos: dict[int, int] = pos) -> dict[str, list[float]]:
                assert c.rows is not None and c.cluster is not None
                return {"rules": [float(x) for x in c.rows[pos[c.slot]]], "alt": [float(x) for x in c.rows[pos[slot]]],
                        "cluster": [float(x) for x in c.cluster]}

            valid = set(int(x) for x in c.valid)
            if c.slot == KEEP:
                pl = view.placements[k]
                w = pl.n_workers if pl is not None else 0
                ai, mi = ARCHS.index(view.jobs[k].arch), MODES.index(view.jobs[k].mode)
            elif c.slot == WAIT:
                w, ai, mi = 0, -1, -1
            else:
                w, ai, mi = int(t.workers[c.slot]), int(t.arch[c.slot]), int(t.mode[c.slot])
            real = [s for s in valid if s > KEEP]
            if c.slot != WAIT and WAIT in valid:
                out.append(("hold", {c.job_id: WAIT}, job(WAIT)))
            if w == 0:  # held by the rules: start it at each worker count it may have
                for s in sorted({min((s for s in real if t.workers[s] == n), default=-1)
                                 for n in {int(t.workers[s]) for s in real}} - {-1}):
                    out.append(("start", {c.job_id: s}, job(s)))
                continue
            for f in cfg.resize:
                n = max(1, int(round(w * f)))
                same = [s for s in real if t.workers[s] == n and t.arch[s] == ai and t.mode[s] == mi]
                other = [s for s in real if t.workers[s] == n]
                pick = (same or other or [-1])[0]
                if pick >= 0:
                    out.append((f"workers x{f:g}", {c.job_id: pick}, job(pick)))
            seen_am = {(ai, mi)}
            for s in sorted(real):
                am = (int(t.arch[s]), int(t.mode[s]))
                if t.workers[s] == w and am not in seen_am:
                    seen_am.add(am)
                    out.append(("arch/mode", {c.job_id: s}, job(s)))
        return out

    def _worlds(self) -> list[Any]:
        """The simulations a decision is rolled out on: the real one, or
        ``futures`` of them with the arrivals sampled (from seeds drawn from
        the episode's seed and the round, so that a run repeats)."""
        k = int(self.config.futures)
        sim = self._sim
        if not k:
            return [sim]
        if sim.sample_jobs is None:
            raise RuntimeError("lookahead futures: the simulation was not given the scenario's workload to sample "
                               "from (run it through hrlsched simulate, compare, evaluate or headroom)")
        now = sim.state.time_s
        # ids never used in this episode: the rules remember jobs by id
        self._next_id = max(self._next_id, max(j.job_id for j in sim.jobs) + 1)
        out = []
        for i in range(k):
            seed = int(np.random.SeedSequence([sim._seed, sim.state.round_index, i, 0xF07]).generate_state(1)[0])
            later = [j for j in sim.sample_jobs(seed) if j.arrival_s > now + 1e-9]
            future = [dataclasses.replace(j, job_id=self._next_id + n) for n, j in enumerate(later)]
            self._next_id += len(future)
            out.append(sim.with_future(future, seed))
        return out

    def _rollout(self, decision: Decision, worlds: list[Any] | None = None) -> float:
        """Job-seconds from this point on with ``decision`` here and the
        rollout policy after (to the end, or to the horizon plus each
        unfinished job's remaining work at its isolated speed), the mean
        over ``worlds``."""
        return float(np.mean([self._rollout_on(w, decision) for w in (worlds or [self._sim])]))

    def _rollout_on(self, world: Any, decision: Decision) -> float:
        self.stats.rollouts += 1
        sim = world.clone()
        out = sim.step(decision)
        total = out.job_seconds
        roller = self._roller
        assert roller is not None
        if isinstance(roller, LookaheadScheduler):
            roller.bind(sim)
        end = None if self.config.horizon_s is None else sim.state.time_s + float(self.config.horizon_s)
        view = out.view
        while view is not None and (end is None or sim.state.time_s < end):
            out = sim.step(roller.decide(view))
            total += out.job_seconds
            view = out.view
        if view is not None:
            total += _time_left(sim)
        return float(total)


def _time_left(sim: Any) -> float:
    """An estimate of the job-seconds still to come in ``sim``: each active
    job's remaining work at its isolated speed (a horizon's tail)."""
    st = sim.state
    act = np.fromiter(st.active, dtype=np.int64, count=len(st.active))
    if not act.size:
        return 0.0
    frac = np.clip(1.0 - st.progress[act] / sim.total[act], 0.0, 1.0)
    return float((frac * sim.isolated_duration_s[act]).sum())
