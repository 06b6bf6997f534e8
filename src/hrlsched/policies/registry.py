"""Policy registry: ``ALLOCATION[+PLACEMENT]`` names -> schedulers.

The learned schedulers (``LEARNED``) are named here by ``"module:attr"``
and imported on first use: their modules need torch, an optional
dependency, and import the environments, which import this registry;
nothing here imports ``hrlsched.agent`` or ``hrlsched.rivals``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from hrlsched.errors import CheckpointError
from hrlsched.policies.base import AllocationPolicy, ComposedScheduler, PlacementPolicy, Scheduler


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    kind: str  # "allocation", "placement" or "scheduler" (joint)
    factory: Callable[[], object]
    summary: str
    paper: str


ALLOCATIONS: dict[str, PolicyInfo] = {}
PLACEMENTS: dict[str, PolicyInfo] = {}
SCHEDULERS: dict[str, PolicyInfo] = {}


def register(kind: str, name: str, factory: Callable[[], object], summary: str, paper: str) -> None:
    table = {"allocation": ALLOCATIONS, "placement": PLACEMENTS, "scheduler": SCHEDULERS}[kind]
    table[name] = PolicyInfo(name, kind, factory, summary, paper)


#: joint schedulers whose factory takes a checkpoint path (None: the shipped one): their classes
LEARNED = {"hrl": "hrlsched.agent.policy:HRLScheduler", "dl2": "hrlsched.rivals.dl2:DL2Scheduler",
           "harmony": "hrlsched.rivals.harmony:HarmonyScheduler"}
#: every scheduler defined above this layer (they run a ``DecisionPoint``), by ``"module:attr"``
LAZY = {**LEARNED, "optimus-tuned": "hrlsched.agent.rules:RulesScheduler",
        "lookahead": "hrlsched.agent.lookahead:LookaheadScheduler"}
#: oracle planners: minutes per episode (the regression fixtures leave them to tests/test_lookahead.py)
PLANNERS = {"lookahead"}
#: joint schedulers that take settings in their name, ``NAME/key=value/...`` (the text is their factory's argument)
WITH_SETTINGS = {"lookahead"}
_resolved: dict[str, Callable[..., Scheduler]] = {}


def _rules(spec: str, settings: str, place: str) -> Scheduler:
    """``optimus-tuned+P[/OPTIONS]``: the rules placed by ``P``, with the
    shipped hint's options changed by ``OPTIONS`` where given (``HintConfig``
    text, e.g. ``f=0``: no keep threshold; named ``spec`` then)."""
    from hrlsched.policies.hint import SHIPPED, HintConfig

    if place not in PLACEMENTS:
        raise ValueError(f"policy {spec!r}: unknown placement {place!r}; expected one of {sorted(PLACEMENTS)}")
    try:
        hint = HintConfig.parse(settings.replace("/", ","), base=SHIPPED) if settings else SHIPPED
    except ValueError as e:
        raise ValueError(f"policy {spec!r}: its hint options: {e}") from None
    sched = _resolve("optimus-tuned")(hint=hint, placement=place)
    if settings:  # else its own name, rules_name(place)
        sched.name = spec
    return sched  # type: ignore[no-any-return]


def make_scheduler(spec: str, checkpoint: str | None = None) -> Scheduler:
    """``fifo``, ``fifo+pack``, or the name of a joint scheduler, with its
    settings for those that take them (``lookahead/level=allocation``);
    ``checkpoint``: the weights of a learned scheduler (``hrl``, ``dl2``, ``harmony``)."""
    head, slash, settings = spec.strip().partition("/")
    name, _, place = head.partition("+")
    if slash and name != "optimus-tuned":
        if head not in WITH_SETTINGS:
            raise ValueError(f"policy {spec!r}: {head!r} takes no settings after '/' (only {sorted(WITH_SETTINGS)} "
                             "and optimus-tuned do)")
        return SCHEDULERS[head].factory(settings)  # type: ignore[call-arg,return-value]
    if checkpoint is not None and name not in LEARNED:
        raise ValueError(f"checkpoint {checkpoint!r}: policy {spec!r} takes no checkpoint "
                         f"(only {sorted(LEARNED)} do)")
    if name == "optimus-tuned" and (place or slash):  # optimus-tuned+migrate, optimus-tuned+migrate/f=0
        return _rules(spec.strip(), settings, place or "pack")
    if name in SCHEDULERS and not place:
        if name in LEARNED:
            return SCHEDULERS[name].factory(checkpoint)  # type: ignore[call-arg,return-value]
        return SCHEDULERS[name].factory()  # type: ignore[return-value]
    if name not in ALLOCATIONS:
        known = sorted(ALLOCATIONS) + sorted(SCHEDULERS)
        raise ValueError(f"policy {spec!r}: unknown policy {name!r}; expected one of {known}")
    alloc: AllocationPolicy = ALLOCATIONS[name].factory()  # type: ignore[assignment]
    place = place or alloc.default_placement
    if place not in PLACEMENTS:
        raise ValueError(f"policy {spec!r}: unknown placement {place!r}; expected one of {sorted(PLACEMENTS)}")
    placement: PlacementPolicy = PLACEMENTS[place].factory()  # type: ignore[assignment]
    return ComposedScheduler(alloc, placement)


def all_policies() -> list[PolicyInfo]:
    return [*ALLOCATIONS.values(), *SCHEDULERS.values(), *PLACEMENTS.values()]


def _resolve(name: str) -> Callable[..., Scheduler]:
    """The class of the scheduler ``name`` (``LAZY``), imported on the first call."""
    cls = _resolved.get(name)
    if cls is None:
        module, _, attr = LAZY[name].partition(":")
        try:
            cls = _resolved[name] = getattr(importlib.import_module(module), attr)
        except ImportError as e:  # torch is an optional dependency of the package
            raise ValueError(f"policy {name} needs torch ({e}); install the extra: "
                             "pip install 'hrlsched[rl]'") from None
    return cls


def _learned(name: str) -> Callable[[str | None], Scheduler]:
    """The factory of the learned scheduler ``name``: its class (``LEARNED``)
    imported on the first call; a checkpoint that cannot be used is a
    ``ValueError`` with the reason alone, as a wrong policy name is."""

    def make(checkpoint: str | None = None) -> Scheduler:
        cls = _resolve(name)
        try:
            return cls(checkpoint)
        except CheckpointError as e:
            raise ValueError(str(e)) from None

    return make


def _lazy(path: str) -> Callable[..., object]:
    """A factory that imports its class (``"module:attr"``) on the first call:
    a command imports only the policies it runs (users time the whole command)."""

    def make(*args: object, **kwargs: object) -> object:
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    return make


def _register_builtins() -> None:
    register("allocation", "fifo", _lazy("hrlsched.policies.fifo:FIFO"), "first-in first-out at the requested GPUs, no preemption", "classic baseline")
    register("allocation", "tiresias", _lazy("hrlsched.policies.tiresias:Tiresias"),
             "discretised 2D-LAS on attained GPU-time, preemptive, no job-duration knowledge", "Gu et al., NSDI'19")
    register("allocation", "tiresias-gittins", lambda: _lazy("hrlsched.policies.tiresias:Tiresias")(gittins=True),
             "2D-Gittins index within Tiresias' queues, from completed jobs' service", "Gu et al., NSDI'19")
    register("allocation", "tiresias-pollux", lambda: _pollux_tiresias(),
             "Tiresias as re-implemented in the Pollux artifact (for hrlsched reproduce pollux-sim)",
             "Gu et al., NSDI'19; Qiao et al., OSDI'21 artifact")
    register("allocation", "srtf", _lazy("hrlsched.policies.srtf:SRTF"), "shortest remaining time first (true remaining time), preemptive", "classic baseline")
    register("allocation", "srtf-est", lambda: _lazy("hrlsched.policies.srtf:SRTF")(estimate=True),
             "SRTF on noisy user estimates of duration", "classic baseline; estimates as in Gu et al., NSDI'19")
    register("allocation", "drf", _lazy("hrlsched.policies.drf:DRF"), "dominant resource fairness over GPU, CPU, memory; elastic per job",
             "Ghodsi et al., NSDI'11 (as DL2's baseline)")
    register("allocation", "tetris", _lazy("hrlsched.policies.tetris:Tetris"), "multi-resource packing alignment + shortest remaining time",
             "Grandl et al., SIGCOMM'14")
    register("scheduler", "hrl", _learned("hrl"),
             "the hierarchical RL agent (allocation and placement; shipped checkpoint or --checkpoint)",
             "this project (docs/agent.md)")
    register("scheduler", "dl2", _learned("dl2"),
             "DL2: allocation by worker/PS increments from a policy network (DRF warm-up, then actor-critic); "
             "least-loaded placement (shipped checkpoint or --checkpoint)",
             "Peng et al., TPDS'21 (rivals/dl2.py)")
    register("scheduler", "harmony", _learned("harmony"),
             "Harmony: placement server by server from an actor-critic with a reward-prediction network; "
             "allocation as requested (shipped checkpoint or --checkpoint)",
             "Bao et al., INFOCOM'19 (rivals/harmony.py)")
    register("allocation", "optimus", _lazy("hrlsched.policies.optimus:Optimus"), "online loss-curve fit + greedy marginal gain per dominant resource",
             "Peng et al., EuroSys'18")
    register("scheduler", "optimus-tuned", lambda: _resolve("optimus-tuned")(),
             "the hrl agent's rules without its network: Optimus with the shipped hint's tuned options (reads each "
             "job's remaining work from the predictor: exact by default, an oracle then), the fastest architecture "
             "and mode at its worker count, pack placing; on the Pollux traces Pollux's batch rule (worker counts priced "
             "at, and each job run at, its batch of best goodput)", "Peng et al., EuroSys'18; Qiao et al., OSDI'21 (the batch rule); this project "
             "(agent/rules.py)")
    register("scheduler", "lookahead", lambda settings=None: _resolve("lookahead")(settings),
             "oracle: rollout planner over optimus-tuned (copies the simulation, tries other slots, policies' "
             "decisions and placements, keeps the best to the end); settings lookahead/key=value/...",
             "Bertsekas' rollout algorithm; this project (agent/lookahead.py, docs/headroom.md)")
    register("allocation", "elas", _lazy("hrlsched.policies.elas:ELAS"), "least attained service on real-time epoch progress rate",
             "Sultana et al., ICPP'20")
    register("placement", "random", _lazy("hrlsched.policies.placement.random:RandomPlacement"), "free GPUs at random", "classic baseline")
    register("placement", "topology", _lazy("hrlsched.policies.placement.interference_aware:TopologyPlacement"), "least predicted interference (perf-model scored candidates)",
             "topology/interference-aware placement")
    register("placement", "optimus", _lazy("hrlsched.policies.optimus:OptimusPlacement"), "fewest servers, workers and PSs spread evenly", "Peng et al., EuroSys'18")
    register("placement", "pack", _lazy("hrlsched.policies.placement.pack:PackPlacement"), "bin-packing: fewest servers, best fit, fewest switches", "classic baseline")
    register("placement", "migrate", _lazy("hrlsched.policies.placement.migrate:MigratePlacement"),
             "pack, then jobs spanning more servers than they need moved onto fewer where room is (a restart)",
             "Xiao et al. (Gandiva's migration for locality), OSDI'18")
    register("placement", "balance", _lazy("hrlsched.policies.placement.balance:BalancePlacement"), "load-balancing: most free GPUs (least-loaded server) first", "classic baseline")
    register("placement", "tiresias", _lazy("hrlsched.policies.tiresias:TiresiasPlacement"), "consolidate large (skewed) models, spread the others", "Gu et al., NSDI'19")
    # --- literature schedulers (issue 18) ---
    register("scheduler", "pollux", lambda: _lazy("hrlsched.policies.pollux:Pollux")(population=50, generations=30, patience=8),
             "goodput (throughput x statistical efficiency) with batch size tuned to the allocation; "
             "evolutionary search of the p-power mean of speedups; re-allocation penalty; one distributed job per server",
             "Qiao et al., OSDI'21")
    register("allocation", "optimus-oracle", _lazy("hrlsched.policies.optimus_oracle:OptimusOracle"),
             "Optimus' greedy marginal gain with exact remaining work and step times (Pollux's Optimus+Oracle)",
             "Peng et al., EuroSys'18; as in Qiao et al., OSDI'21")
    register("allocation", "themis", _lazy("hrlsched.policies.themis:Themis"),
             "finish-time fairness rho; partial-allocation auctions among the worst-rho jobs, leftovers to others",
             "Mahajan et al., NSDI'20")
    register("scheduler", "gavel", _lazy("hrlsched.policies.gavel:Gavel"),
             "heterogeneity-aware max-min fairness over effective throughput (HiGHS LP), round-based priorities",
             "Narayanan et al., OSDI'20")
    register("scheduler", "gavel-makespan", lambda: _lazy("hrlsched.policies.gavel:Gavel")("makespan"),
             "Gavel's minimum makespan (total duration) policy, same LP machinery and rounds",
             "Narayanan et al., OSDI'20")
    register("scheduler", "allox", _lazy("hrlsched.policies.allox:AlloX"),
             "min-cost bipartite matching of jobs to (GPU type, position), sum of completion times",
             "Le et al., EuroSys'20")
    register("scheduler", "gandiva", _lazy("hrlsched.policies.gandiva:Gandiva"),
             "packing (GPU time-slicing) when it pays, introspective unpacking and migration, grow-shrink",
             "Xiao et al., OSDI'18")
    register("scheduler", "gandiva-fair", _lazy("hrlsched.policies.gandiva_fair:GandivaFair"),
             "user tickets split over jobs, gang-aware stride scheduling, trading of fast GPUs between users",
             "Chaudhary et al., EuroSys'20")


def _pollux_tiresias() -> AllocationPolicy:
    from hrlsched.policies.tiresias import Tiresias

    t = Tiresias(thresholds=(16 * 3600.0,), starve_knob=0.0)
    t.name = "tiresias-pollux"
    t.default_placement = "balance"
    return t


_register_builtins()

