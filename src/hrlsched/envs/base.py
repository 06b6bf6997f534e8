"""The machinery the three environments share: a workload pool, the
steppable engine (``Simulation``), one decision point decided job after job
(``DecisionPoint``, in ``envs.decision``: the board, candidates, masks and
observation, with no gym and no simulation), the heuristics it runs by
registry name (``heuristics``), and the reward.

At each decision point the active jobs (arrival order, at most
``max_jobs``; the others wait) are decided one by one. A job's
*allocation* (workers, PSs, architecture, mode) comes from the agent
(``agent_allocates``: one action over the candidate slots) or from a
heuristic allocation policy; its *placement* comes from the agent
(``agent_places``: one action per worker, then per PS) or from a heuristic
placement policy. When every job is decided the engine applies the
``Decision`` and advances to the next decision point.

Reward: ``-(job-seconds in the system during the engine step) / (3600 *
reward_jobs)``, i.e. minus the number of active jobs times the elapsed
simulated time, in hours per ``reward_jobs`` jobs; it is given on the action
that completes a decision point (0 on the sub-steps before it), so that its
sum over an episode in which every job finishes is ``-total JCT / (3600 *
reward_jobs)``. Episodes terminate when the workload is done and are
truncated at ``max_time_s`` simulated seconds or ``max_decisions`` decision
points.

Invalid actions: by default (``invalid_action="fallback"``) an action the
mask forbids is counted (``info["invalid_actions"]``) and the job waits (an
allocation choice) or is deferred (a placement phase), so that ``step``
takes any action of the action space, as gymnasium's API (and its
``check_env``) expects; ``"raise"`` raises ``InvalidActionError`` instead.
The action space's ``sample()`` draws among the actions valid now.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hrlsched.contract import ClusterView
from hrlsched.envs.board import Board
from hrlsched.envs.candidates import WORKER_OPTIONS
from hrlsched.envs.decision import ALLOCATE, PLACE, DecisionPoint, InvalidActionError
from hrlsched.envs.masks import HeuristicFeasibility, PartialPlacement
from hrlsched.envs.pool import WorkloadPool
from hrlsched.policies.base import AllocationPolicy
from hrlsched.policies.hint import HintConfig
from hrlsched.policies.placement.frame import IncrementalPlacement
from hrlsched.policies.registry import ALLOCATIONS, PLACEMENTS
from hrlsched.sim.simulation import Simulation, StepResult

__all__ = ["ALLOCATE", "PLACE", "Heuristics", "InvalidActionError", "MaskedDiscrete", "SchedulingEnv", "as_hint", "heuristics"]


class Heuristics(NamedTuple):
    """The policy objects a ``DecisionPoint`` runs (its keyword arguments of
    the same names)."""

    placement: IncrementalPlacement
    allocation: AllocationPolicy | None
    hint: AllocationPolicy | None


def heuristics(*, agent_allocates: bool, placement: str = "pack", allocation: str = "fifo",
               hint: HintConfig | None = None, worker_options: Sequence[int] = WORKER_OPTIONS) -> Heuristics:
    """A ``DecisionPoint``'s heuristics by registry name: the ``placement``
    (job by job), the ``allocation`` (made only where the agent does not
    allocate) and the hint policy of ``hint`` (``HintConfig.make_policy``,
    on the menu ``worker_options``; None: no hint). Unknown names and
    options that do not fit are refused by name."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement: unknown placement {placement!r}; expected one of {sorted(PLACEMENTS)}")
    pol = PLACEMENTS[placement].factory()
    if not isinstance(pol, IncrementalPlacement):
        raise ValueError(f"placement {placement!r}: expected a job-by-job placement policy")
    if not agent_allocates and allocation not in ALLOCATIONS:
        raise ValueError(f"allocation: unknown policy {allocation!r}; expected one of {sorted(ALLOCATIONS)}")
    made = hint.make_policy(worker_options) if hint is not None else None
    alloc: AllocationPolicy | None = None if agent_allocates else ALLOCATIONS[allocation].factory()  # type: ignore[assignment]
    return Heuristics(pol, alloc, made)


def as_hint(hint: HintConfig | str | None) -> HintConfig | None:
    """A hint given as a ``HintConfig``, as its text (``HintConfig.parse``,
    e.g. ``"a=1.25,menu"``; ``""``: the paper's Optimus), or None (no hint)."""
    if hint is None or isinstance(hint, HintConfig):
        return hint
    if isinstance(hint, str):
        return HintConfig.parse(hint)
    raise ValueError(f"hint: expected a HintConfig, its text (e.g. 'a=1.25,menu') or None, got {hint!r}")


class MaskedDiscrete(spaces.Discrete):
    """``Discrete`` whose ``sample()`` with no mask draws among the actions
    the environment currently allows (``valid``, kept up to date by the
    environment), so that generic tools that sample the action space
    (``check_env``, random baselines) send valid actions."""

    def __init__(self, n: int, seed: int | None = None) -> None:
        super().__init__(n, seed=seed)
        self.valid = np.ones(n, dtype=np.int8)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        """A valid action now (``mask``/``probability``: as ``Discrete.sample``)."""
        if mask is None and probability is None:
            mask = self.valid
        return super().sample(mask=mask, probability=probability)


class SchedulingEnv(gym.Env):
    """Base of ``AllocationEnv``, ``PlacementEnv`` and ``HierarchicalEnv``
    (see those for the action spaces): a ``Simulation`` stepped one decision
    point at a time, each point decided by a ``DecisionPoint`` (``self.dp``).
    Constructor arguments:

    - ``scenario``, ``seeds``, ``overrides`` (``--set``-like ``key=value``), or
      a ready ``pool`` (``WorkloadPool``): the workloads drawn at each reset.
    - ``placement``: the heuristic placement (by name, ``policies.registry``)
      that places the agent's allocations and masks allocation candidates;
      ``allocation``: the heuristic allocation of ``Placement-v0``
      (``heuristics``).
    - ``max_jobs``, ``max_gpus``, ``max_sockets``, ``max_links``: padding of
      the observation (default: the scenario's).
    - ``worker_options``, ``ps_options``: the candidate menu (``candidates``).
    - ``decision_points``/``decision_every``: when the agent is asked, unless
      the scenario's ``sim.decision_points`` says (default ``"events"``:
      at arrivals and completions).
    - ``max_time_s``/``max_decisions``: truncation; ``reward_jobs``: reward scale.
    - With decision points at events, a decision that runs no job at all
      would stall the clock until the time limit; the first job the heuristic
      placement can place then starts (counted in ``info["idle_rescues"]``).
    - ``skip_forced``: a job whose only valid choice is to wait is passed
      over without asking the agent.
    - ``invalid_action``: ``"fallback"`` (an action the mask forbids is
      counted in ``info["invalid_actions"]`` and the job waits, or is
      deferred in a placement phase) or ``"raise"`` (it raises
      ``InvalidActionError`` naming the action and why: to catch an agent
      that ignores the mask). ``"fallback"`` by default, so that
      ``gymnasium``'s ``check_env`` passes: its determinism check samples an
      action before it resets the environment, so the action may be masked
      at that state, however the action space samples.
    - ``hint``: the hint, an allocation heuristic run at every decision
      point whose choices the level-1 observation shows (``hint_workers``
      per job, ``is_hint`` per candidate), with how the point uses it
      (``policies.hint.HintConfig``, or its text, e.g. ``"a=1.25,menu"``;
      ``""``: the paper's Optimus); None: no hint, those features are zero.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    agent_allocates = True
    agent_places = False
    point_class: type[DecisionPoint] = DecisionPoint  # what decides each point (``envs.flat``'s its own)

    def __init__(
        self,
        scenario: str = "default",
        seeds: Sequence[int] = (0,),
        overrides: Sequence[str] = (),
        pool: WorkloadPool | None = None,
        placement: str = "pack",
        allocation: str = "fifo",
        max_jobs: int | None = None,
        max_gpus: int | None = None,
        max_sockets: int | None = None,
        max_links: int | None = None,
        worker_options: Sequence[int] = WORKER_OPTIONS,
        ps_options: Sequence[str] = ("one", "half"),
        max_tasks_per_gpu: int = 1,
        decision_points: str = "events",
        decision_every: int = 1,
        max_time_s: float | None = None,
        max_decisions: int | None = None,
        reward_jobs: float = 10.0,
        skip_forced: bool = True,
        invalid_action: str = "fallback",
        hint: HintConfig | str | None = None,
    ) -> None:
        if invalid_action not in ("raise", "fallback"):
            raise ValueError(f"invalid_action: expected 'raise' or 'fallback', got {invalid_action!r}")
        self.invalid_action = invalid_action
        self.invalid_actions = 0
        self.pool = pool if pool is not None else WorkloadPool(scenario, seeds, overrides)
        self.topo = self.pool.built(self.pool.seeds[0]).topology
        cfg = as_hint(hint) if self.agent_allocates else None  # (the hint runs only where the agent allocates)
        self.hint = cfg
        self.hint_name = cfg.policy if cfg is not None else None
        made = heuristics(agent_allocates=self.agent_allocates or not self.point_class.heuristic_allocation,
                          placement=placement, allocation=allocation, hint=cfg, worker_options=worker_options)
        dp = self.point_class(
            self.topo, agent_allocates=self.agent_allocates, agent_places=self.agent_places,
            **made._asdict(), max_jobs=int(max_jobs if max_jobs is not None else self.pool.max_jobs()),
            max_gpus=max_gpus, max_sockets=max_sockets, max_links=max_links, worker_options=worker_options,
            ps_options=ps_options, max_tasks_per_gpu=max_tasks_per_gpu, skip_forced=skip_forced,
            hint_config=cfg,
        )
        self.dp = dp
        self.placement_policy = dp.placement_policy
        self.max_tasks = dp.max_tasks
        self.max_jobs, self.max_gpus, self.max_sockets, self.max_links = (
            dp.max_jobs, dp.max_gpus, dp.max_sockets, dp.max_links)
        self.table = dp.table
        self.n_cand, self.place_off, self.defer_action = dp.n_cand, dp.place_off, dp.defer_action
        self.action_space = MaskedDiscrete(dp.n_actions)
        self.observation_space = dp.observation_space
        self.decision_points, self.decision_every = decision_points, int(decision_every)
        self.max_time_s = max_time_s
        self.max_decisions = max_decisions
        if reward_jobs <= 0:
            raise ValueError(f"reward_jobs: expected > 0, got {reward_jobs}")
        self.reward_scale = 1.0 / (3600.0 * float(reward_jobs))
        self.skip_forced = dp.skip_forced
        self._sims: dict[int, Simulation] = {}
        self._sim: Simulation | None = None
        self._done = False
        self._final_mask = np.zeros(dp.n_actions, dtype=np.int8)
        self._final_mask[0] = 1  # terminal observation: keep one action valid for code that samples from it

    # ------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        wseed = self.pool.draw(self.np_random)
        sim = self._sims.get(wseed)
        if sim is None:
            sim = self.pool.simulation(wseed, self.max_tasks, self.decision_points, self.decision_every)
            if self.max_time_s is not None:
                sim.cfg = dataclasses.replace(sim.cfg, max_time_s=float(self.max_time_s))
            self._sims[wseed] = sim
        self._sim = sim
        self.workload_seed = wseed
        self.dp.rescue_idle = sim.points == "events"
        self.dp.reset(self.np_random, workload=sim)  # (what it learnt of this workload's jobs is kept)
        self.invalid_actions = 0
        self.episode_job_s = 0.0
        self._done = False
        view = sim.reset(int(self.np_random.integers(2**31)))
        if view is None:
            raise ValueError(f"scenario {self.pool.name!r} seed {wseed}: the workload has no decision point")
        self._pending_reward = self._start_point(view)
        return self._obs(), self._info()

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self._done or self._sim is None:
            raise RuntimeError("step() called on a finished episode; call reset()")
        dp = self.dp
        a = int(action)
        if not (0 <= a < dp.n_actions) or not dp.mask()[a]:
            if self.invalid_action == "raise":
                raise InvalidActionError(f"action {a}: {dp.why_invalid(a)}")
            self.invalid_actions += 1  # "fallback": the job waits (allocation) or is deferred (placement)
            more = dp.skip()
        else:
            more = dp.act(a)
        reward = self._pending_reward
        self._pending_reward = 0.0
        if not more:
            reward += self._finish_point()
        terminated = truncated = False
        if self._done:
            terminated = self._terminated
            truncated = not terminated
        return self._obs(), float(reward), terminated, truncated, self._info()

    def action_masks(self) -> np.ndarray:
        """Valid actions (sb3-contrib MaskablePPO convention)."""
        return self._current_mask().astype(bool)

    # ----------------------------------------------------- decision points
    def _start_point(self, view: ClusterView) -> float:
        """Set up a decision point; advance the engine over points with no
        choice for the agent. Returns the reward of those engine steps."""
        reward = 0.0
        while not self.dp.begin(view):
            r, nxt = self._engine_step()
            reward += r
            if nxt is None:
                return reward
            view = nxt
        return reward

    def _finish_point(self) -> float:
        """The point is decided: step the engine, set up the next point."""
        r, view = self._engine_step()
        if view is None:
            return r
        return r + self._start_point(view)

    def _engine_step(self) -> tuple[float, ClusterView | None]:
        sim = self._sim
        assert sim is not None
        out: StepResult = sim.step(self.dp.decision())
        self.episode_job_s += out.job_seconds
        r = -out.job_seconds * self.reward_scale
        if out.done:
            self._done = True
            st = sim.state
            self._terminated = bool(st.next_arrival >= len(sim.jobs) and not st.active)
            return r, None
        if self.max_decisions is not None and self.dp.decisions >= self.max_decisions:
            self._done = True
            self._terminated = False
            return r, None
        return r, out.view

    # ------------------------------------------------------- observation
    def _current_mask(self) -> np.ndarray:
        return self._final_mask if self._done else self.dp.mask()

    def _obs(self) -> dict[str, np.ndarray]:
        obs = self.dp.observation()
        if self._done:  # the terminal observation: no job is current, nothing to choose
            obs["current_job"][:] = 0
            obs["jobs"][:, 1] = 0.0
            obs["context"][:] = 0.0
            obs["action_mask"] = self._final_mask.copy()
            if "candidates" in obs:
                obs["candidates"][:] = 0.0
        self.action_space.valid = self._current_mask()  # type: ignore[attr-defined]
        return obs

    def _info(self) -> dict[str, Any]:
        dp = self.dp
        return {
            "action_mask": self._current_mask().astype(bool), "time_s": dp.view.time_s if dp.view else 0.0,
            "decision_points": dp.decisions, "workload_seed": self.workload_seed,
            "phase": "allocate" if dp.phase == ALLOCATE else "place",
            "job_seconds": self.episode_job_s, "invalid_actions": self.invalid_actions,
            "idle_rescues": dp.rescues,
        }

    # ------------------------------------ the decision point's state, read-only
    @property
    def _view(self) -> ClusterView | None:
        return self.dp.view

    @property
    def _mask(self) -> np.ndarray:
        return self._current_mask()

    @property
    def phase(self) -> int:
        return self.dp.phase

    @property
    def k(self) -> int:
        return self.dp.k

    @property
    def part(self) -> PartialPlacement | None:
        return self.dp.part

    @property
    def board(self) -> Board:
        return self.dp.board

    @property
    def feas(self) -> HeuristicFeasibility:
        return self.dp.feas

    @property
    def decisions(self) -> int:
        return self.dp.decisions

    @property
    def rescues(self) -> int:
        return self.dp.rescues
