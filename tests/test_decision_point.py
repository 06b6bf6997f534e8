"""``DecisionPoint`` on its own (no gym): a hand loop that steps a
``Simulation`` and decides each point with random valid actions is the same
episode as the environment's with the same seed; a scheduler built on it
runs inside the engine."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils import seeding

import hrlsched.envs  # noqa: F401  (registers the environments)
from hrlsched.cluster import ClusterSpec, ServerGroupSpec, Topology
from hrlsched.contract import ClusterView, Decision, Scheduler
from hrlsched.core.placement import Placement
from hrlsched.envs import (
    AllocationEnv,
    DecisionPoint,
    HierarchicalEnv,
    InvalidActionError,
    PlacementEnv,
    WorkloadPool,
)
from hrlsched.envs.base import heuristics
from hrlsched.envs.board import PlacementIndex, crossed_links, link_layout
from hrlsched.envs.candidates import WORKER_OPTIONS
from hrlsched.envs.features import DYN_COLUMNS
from hrlsched.policies.hint import HintConfig
from hrlsched.sim.engine import Simulator
from tests.test_envs import SMALL, open_choices

ENVS = {"allocation": AllocationEnv, "placement": PlacementEnv, "hierarchical": HierarchicalEnv}


def point(topology: Topology, *, agent_allocates: bool, agent_places: bool, placement: str = "pack",
          allocation: str = "fifo", hint: str | None = None, **kw: object) -> DecisionPoint:
    """A ``DecisionPoint`` with its heuristics by registry name and its hint
    as ``HintConfig`` text (None: no hint), as the environments make it."""
    cfg = None if hint is None else HintConfig.parse(hint)
    made = heuristics(agent_allocates=agent_allocates, placement=placement, allocation=allocation, hint=cfg,
                      worker_options=kw.get("worker_options", WORKER_OPTIONS))  # type: ignore[arg-type]
    return DecisionPoint(topology, agent_allocates=agent_allocates, agent_places=agent_places, **made._asdict(),
                         hint_config=cfg, **kw)  # type: ignore[arg-type]


def pool(seed: int) -> WorkloadPool:
    return WorkloadPool("default", [seed], [*SMALL, "workload.gpu_counts=[1,2,4]", "workload.gpu_probs=[0.5,0.3,0.2]"],
                        transform=open_choices)


def env_episode(cls: type, p: WorkloadPool, seed: int, placement: str) -> tuple[list[dict], float, np.ndarray]:
    env = cls(pool=p, placement=placement)
    rng = np.random.default_rng(seed + 1)
    obs, info = env.reset(seed=seed)
    seen, done = [obs], False
    while not done:
        valid = np.flatnonzero(info["action_mask"])
        obs, _, te, tr, info = env.step(int(valid[rng.integers(valid.size)]))
        seen.append(obs)
        done = te or tr
    return seen[:-1], info["job_seconds"], env._sim.result().finish_s  # the last one is the terminal observation


def hand_episode(cls: type, p: WorkloadPool, seed: int, placement: str) -> tuple[list[dict], float, np.ndarray]:
    """The same episode without gym: the env's seeding, its Simulation, a DecisionPoint."""
    np_random, _ = seeding.np_random(seed)
    wseed = p.draw(np_random)
    sim = p.simulation(wseed, 1, "events")
    dp = point(p.built(wseed).topology, agent_allocates=cls.agent_allocates, agent_places=cls.agent_places,
                       placement=placement, max_jobs=p.max_jobs(), rescue_idle=sim.points == "events")
    dp.reset(np_random)
    view = sim.reset(int(np_random.integers(2**31)))
    rng = np.random.default_rng(seed + 1)
    seen, job_s = [], 0.0
    while view is not None:
        if dp.begin(view):
            more = True
            while more:
                obs = dp.observation()
                assert np.array_equal(obs["action_mask"], dp.mask())
                seen.append(obs)
                valid = np.flatnonzero(dp.mask())
                more = dp.act(int(valid[rng.integers(valid.size)]))
        out = sim.step(dp.decision())
        job_s += out.job_seconds
        view = out.view
    return seen, job_s, sim.result().finish_s


@pytest.mark.parametrize("kind", list(ENVS))
@pytest.mark.parametrize("placement", ["pack", "random"])
def test_hand_loop_is_the_env_episode(kind: str, placement: str) -> None:
    cls, seed = ENVS[kind], 5
    a, job_a, fin_a = env_episode(cls, pool(seed), seed, placement)
    b, job_b, fin_b = hand_episode(cls, pool(seed), seed, placement)
    assert len(a) == len(b) > 0
    for oa, ob in zip(a, b):
        assert oa.keys() == ob.keys()
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)
    assert job_a == pytest.approx(job_b, rel=1e-12)
    np.testing.assert_array_equal(fin_a, fin_b)
    assert np.all(np.isfinite(fin_a)), "the small workload finishes"


def test_invalid_action_raises_and_leaves_the_point_alone() -> None:
    p = pool(3)
    sim = p.simulation(3, 1, "events")
    dp = point(p.built(3).topology, agent_allocates=True, agent_places=True, max_jobs=p.max_jobs())
    dp.reset(np.random.default_rng(0))
    view = sim.reset(0)
    assert view is not None and dp.begin(view)
    bad = int(np.flatnonzero(dp.mask() == 0)[-1])
    before = dp.observation()
    with pytest.raises(InvalidActionError, match=f"action {bad}"):
        dp.act(bad)
    after = dp.observation()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


class RandomAgent(Scheduler):
    """A scheduler that decides every point with random valid actions: the
    shape of an RL policy running inside the engine."""

    name = "random-agent"
    event_driven = True

    def __init__(self, dp: DecisionPoint, seed: int) -> None:
        self.dp = dp
        self.rng = np.random.default_rng(seed)
        self.choices = 0

    def reset(self, topology, rng: np.random.Generator) -> None:  # noqa: ANN001
        self.dp.reset(rng)

    def decide(self, view: ClusterView) -> Decision:
        more = self.dp.begin(view)
        while more:
            valid = np.flatnonzero(self.dp.mask())
            more = self.dp.act(int(valid[self.rng.integers(valid.size)]))
            self.choices += 1
        return self.dp.decision()


def test_scheduler_on_a_decision_point_runs_in_the_engine() -> None:
    b = pool(4).built(4)
    agent = RandomAgent(point(b.topology, agent_allocates=True, agent_places=True,
                                      max_jobs=len(b.jobs)), seed=0)
    res = Simulator(b.topology, b.jobs, b.perf, agent, b.engine, predictor=b.predictor).run()
    assert agent.choices > 0
    assert np.all(np.isfinite(res.finish_s))


def test_placement_index_crosses_the_links_of_crossed_links() -> None:
    for nvlink in (0.0, 300.0):
        topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=6, nvlink_gbps=nvlink)], racks=3))
        off = link_layout(topo)[0]
        index = PlacementIndex(topo, off)
        rng = np.random.default_rng(1)
        for _ in range(500):
            w = int(rng.choice([1, 2, 3, 4, 8, 16]))
            g = rng.choice(topo.n_gpus, w, replace=False) if rng.random() < 0.5 else np.arange(w) + 8 * rng.integers(4)
            pl = Placement.of(g, rng.integers(topo.n_sockets, size=int(rng.integers(0, 4))))
            got = index.get(pl).links
            assert sorted(got.tolist()) == sorted(set(crossed_links(topo, off, pl).tolist()))


def test_placement_index_starts_again_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index keeps at most its bound of placements (a long episode, the learned placement's
    candidates), and an entry made again after it starts over is the same."""
    import hrlsched.envs.board as board

    monkeypatch.setattr(board, "_INDEX_ENTRIES", 8)
    topo = Topology.from_spec(ClusterSpec(server_groups=[ServerGroupSpec(count=4)], racks=2))
    index = PlacementIndex(topo, link_layout(topo)[0])
    pls = [Placement.of([g, (g + 9) % topo.n_gpus], [g % topo.n_sockets]) for g in range(30)]
    first = [index.get(pl) for pl in pls]
    assert len(index._cache) <= 9 and len(index._by_id) <= 9
    for pl, e in zip(pls, first):
        again = index.get(Placement.of(list(pl.gpus), list(pl.ps_sockets)))  # another object: by value
        assert again.links.tolist() == e.links.tolist() and again.per_server == e.per_server


def test_slots_the_predictor_cannot_price_are_masked() -> None:
    """A measured backend has no speed for some placements (its tables end)
    and raises there; the candidates that would need one are masked, so a
    random agent's episode never asks the engine for them."""
    from hrlsched.config import resolve_run_config
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.simulation import Simulation

    built = build_scenario(resolve_run_config("default", None, 0, [*SMALL, "workload.gpu_counts=[1,2,4]",
                                                                   "workload.gpu_probs=[0.5,0.3,0.2]"]).scenario, 0)
    perf = built.perf
    speeds = perf.speeds

    def priced_up_to_4(jobs, placements, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if any(pl.n_workers > 4 for pl in placements):
            raise ValueError("no measurement near this placement")
        return speeds(jobs, placements, *a, **kw)

    def isolated_up_to_4(jobs, placements, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if any(pl.n_workers > 4 for pl in placements):
            raise ValueError("no measurement near this placement")
        return isolated(jobs, placements, *a, **kw)

    isolated = perf.isolated_speeds
    perf.speeds, perf.isolated_speeds = priced_up_to_4, isolated_up_to_4
    perf.prices_everything = False
    perf._alone_cache.clear()
    sim = Simulation(built.topology, built.jobs, perf, built.engine)  # the model predicts for itself
    dp = point(built.topology, agent_allocates=True, agent_places=False, max_jobs=16)
    dp.reset(np.random.default_rng(0))
    rng = np.random.default_rng(1)
    view, offered = sim.reset(0), 0
    while view is not None:
        more = dp.begin(view)
        while more:
            valid = np.flatnonzero(dp.mask())
            assert np.all(dp.table.workers[valid] <= 4)
            offered += int(np.count_nonzero(dp.table.workers[valid] == 4))
            more = dp.act(int(valid[rng.integers(valid.size)]))
        view = sim.step(dp.decision()).view
    assert offered > 0  # the largest priced slot was offered: only the unpriced ones were masked


def test_model_room_follows_commitments_as_the_arrays() -> None:
    """``ModelRoom`` catches up server by server on what commitments change;
    its worker capacities, their histogram and PS room are exactly what the
    occupancy's arrays give after any sequence of commits, releases and
    wholesale changes. Models with the same resource needs share one room."""
    from hrlsched.config import resolve_run_config
    from hrlsched.core.catalogue import get_profile
    from hrlsched.envs.board import MARGIN, Board
    from hrlsched.policies.placement.occupancy import Occupancy
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.simulation import Simulation

    built = build_scenario(resolve_run_config("default", None, 0, ["workload.jobs=40", "workload.duration_h=0.01",
                                                                   "cluster.server_groups.0.count=6"]).scenario, 0)
    sim = Simulation(built.topology, built.jobs, built.perf, built.engine, predictor=built.predictor)
    view = sim.reset(0)
    while len(view.jobs) < 20:
        view = sim.step(Decision(placements={})).view
    topo = view.topology
    profiles = {j.model: get_profile(j.model, view.catalogue) for j in view.jobs}
    board = Board(view, 2, profiles, link_layout(topo)[0])
    occ = board.occ
    rng = np.random.default_rng(3)
    held: list[tuple] = []
    for step in range(400):
        if held and rng.random() < 0.4:
            job, pl = held.pop(int(rng.integers(len(held))))
            board.release(job, pl)
        elif step % 97 == 50:
            job = view.jobs[int(rng.integers(len(view.jobs)))]
            pl = Placement.of([int(rng.integers(topo.n_gpus))])
            board.reserve([job], [pl])  # a wholesale change
            held.append((job, pl))
        else:
            job = view.jobs[int(rng.integers(len(view.jobs)))]
            w = int(rng.integers(1, 5))
            pl = Placement.of(rng.choice(topo.n_gpus, w, replace=False), rng.integers(topo.n_sockets, size=w // 2))
            board.commit(job, pl)
            held.append((job, pl))
        plain = Occupancy(view, 2)  # the arrays' formulas, on the same room
        plain.gpu_free, plain.cores_free, plain.mem_free = occ.gpu_free.copy(), occ.cores_free.copy(), occ.mem_free.copy()
        for probe in view.jobs[:8]:
            room = occ.room(probe)
            cap = plain.worker_capacity(probe)
            assert room.cap == cap.tolist() and room.total == int(cap.sum()) == occ.worker_total(probe)
            for n in (1, 2, 3, 5, 8):  # pack's best-fit server, also with PSs reserved
                for r in (0, 1, 2):
                    assert occ.fullest_fit(probe, n, r) == plain.fullest_fit(probe, n, r)
            assert room.hist == np.bincount(cap, minlength=len(room.hist)).tolist()
            p = profiles[probe.model]
            k = np.minimum(np.floor((occ.cores_free - MARGIN) / p.ps_cores), np.floor((occ.mem_free - MARGIN) / p.ps_mem_gb))
            assert room.ps_total == float(np.maximum(k, 0).sum())
    needs = {m: (p.worker_cores, p.worker_mem_gb, p.ps_cores, p.ps_mem_gb) for m, p in profiles.items()}
    probes = view.jobs[:8]
    assert len({needs[j.model] for j in probes}) < len({j.model for j in probes})  # some models share their needs
    for a in probes:
        for b in probes:
            assert (occ.room(a) is occ.room(b)) == (needs[a.model] == needs[b.model])


def test_allocation_rows_are_the_light_observation() -> None:
    """``allocation_rows`` (the hrl policy's scorer inputs) gives the same
    values as ``observation(full=False)``: the current job, cluster and context
    rows, candidate rows of the valid slots and valid actions, over a whole
    episode with a hint."""
    from hrlsched.sim.simulation import Simulation

    b = pool(3).built(3)
    dp = point(b.topology, agent_allocates=True, agent_places=False, max_jobs=len(b.jobs), hint="a=1,h=3000,menu",
                       worker_options=[1, 2, 4, 8])
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
    view, rng, checked, asyn = sim.reset(3), np.random.default_rng(3), 0, 0
    dp.reset(rng)
    while view is not None:
        more = dp.begin(view)
        while more:
            obs = dp.observation(full=False)
            candidates, valid = obs["candidates"], np.flatnonzero(obs["action_mask"])
            # the valid rows in two parts: the fixed one (kept: read-only) and this choice's columns
            k, cluster, context, base, dyn, ix = dp.allocation_rows()
            assert k == int(np.flatnonzero(obs["current_job"])[0])
            assert not base.flags.writeable and base.shape == (valid.size, candidates.shape[1])
            np.testing.assert_array_equal(ix, valid)
            np.testing.assert_array_equal(cluster, obs["cluster"])
            np.testing.assert_array_equal(context, obs["context"])
            assert not base[:, list(DYN_COLUMNS)].any()
            rows = base.copy()
            rows[:, list(DYN_COLUMNS)] = dyn
            np.testing.assert_array_equal(rows, candidates[valid])
            cur, pl = view.jobs[k], view.placements[k]
            if valid.size > 1 and valid[1] == 1 and view.speed[k] > 0:  # keep: the job's measured progress
                x = float(view.speed[k])
                if cur.mode == "async":  # (made for all such jobs in one call per point)
                    x *= float(view.perf.efficiency([cur], [pl], view.batch_sizes[k:k + 1], np.zeros(1))[0])
                    asyn += 1
                assert dyn[1, 0] == np.float32(min(x / max(float(dp.obs.req_speed[k]), 1e-12), 1e6))
            more = dp.act(int(valid[rng.integers(valid.size)]))
            checked += 1
        view = sim.step(dp.decision()).view
    assert checked > 20 and asyn > 0


@pytest.mark.parametrize(("placement", "workers", "cores"), [
    ("pack", (1, 2, 4), 24), ("tiresias", (1, 2), 24), ("pack", (1, 2, 4, 8, 16), 24),
    ("pack", (1, 2, 4), 3), ("balance", (1, 2), 2),  # few cores: the PS room binds
])
def test_candidate_mask_is_what_the_placement_can_place(placement: str, workers: tuple[int, ...], cores: int) -> None:
    """A candidate slot is valid exactly when the heuristic placement places
    it on what is left (asked slot by slot), over a whole episode: the rules
    that decide most slots without asking, kept per room (``_cand_mask``,
    with the room held only up to the menu's largest need), decide as asking
    would."""
    from hrlsched.envs.candidates import KEEP, WAIT
    from hrlsched.sim.simulation import Simulation

    b = WorkloadPool("default", [3], [*SMALL, "workload.gpu_counts=[1,2,4]", "workload.gpu_probs=[0.5,0.3,0.2]",
                                      f"cluster.server_groups.0.cores_per_socket={cores}"],
                     transform=open_choices).built(3)
    dp = point(b.topology, agent_allocates=True, agent_places=False, max_jobs=len(b.jobs),
                       placement=placement, skip_forced=False, worker_options=workers)
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
    view, rng, checked, beyond = sim.reset(3), np.random.default_rng(3), 0, 0
    dp.reset(rng)
    t = dp.table
    while view is not None:
        more = dp.begin(view)
        while more:
            k, mask = dp.k, dp.mask()[: t.size].astype(bool)
            cur, pl = view.jobs[k], view.placements[k]
            want = np.zeros(t.size, dtype=bool)
            want[WAIT] = True
            want[KEEP] = pl is not None and dp.board.fits(cur, pl)
            for c in dp.masks.slots(cur, dp.base_jobs[cur.job_id]).tolist():
                job = dp.pricing.slot_job(cur, c)
                want[c] = dp.feas.place(view, dp.board, job, int(t.workers[c]), int(t.ps[c])) is not None
            np.testing.assert_array_equal(mask, want)
            checked += 1
            beyond += dp.feas.worker_room(dp.board, cur) > max(workers)  # the key's room held at the menu's most
            more = dp.act(int(rng.choice(np.flatnonzero(mask))))
        view = sim.step(dp.decision()).view
    assert checked > 20 and (beyond > 0 or max(workers) >= 16)


def test_reserve_running_hint_holds_only_the_jobs_the_hint_keeps() -> None:
    """``reserve_running="hint"``: at every point, the running jobs holding
    their room are exactly those whose hint allocation is their current one;
    the engine accepts every decision of a random episode; a wrong value is
    refused by name."""
    from hrlsched.sim.simulation import Simulation

    b = pool(4).built(4)
    dp = point(b.topology, agent_allocates=True, agent_places=False, max_jobs=len(b.jobs), hint="a=1,f=0.2,menu,r=hint",
                       worker_options=[1, 2, 4, 8])
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
    view, rng = sim.reset(4), np.random.default_rng(4)
    dp.reset(rng)
    held = changed = 0
    while view is not None:
        more = dp.begin(view)
        for k, (j, pl) in enumerate(zip(view.jobs[:dp.n_dec], view.placements[:dp.n_dec])):
            if pl is None:
                assert not dp._reserved[k]
                continue
            al = dp.hints.get(j.job_id)
            keeps = al is not None and al.workers == len(pl.gpus) and al.arch in (None, j.arch) \
                and al.mode in (None, j.mode) and (max(al.ps, 1) if j.arch == "ps" else 0) == len(pl.ps_sockets)
            # a job whose turn has come (k <= dp.k) has given its room back
            assert dp._reserved[k] == (keeps and k > dp.k), (k, keeps)
            held += keeps
            changed += not keeps
        while more:
            valid = np.flatnonzero(dp.mask())
            more = dp.act(int(valid[rng.integers(valid.size)]))
        view = sim.step(dp.decision()).view
    assert held > 20 and changed > 5
    with pytest.raises(ValueError, match="reserve_running"):
        point(b.topology, agent_allocates=True, agent_places=False, max_jobs=8, hint="r=some")


def test_level2_point_with_nothing_to_place_builds_its_board_only_when_asked() -> None:
    """At a level-2 point where every allocated job keeps its placement the
    board is not built; asked for, it holds the kept placements, as one built
    eagerly does. Where the kept placements are all the engine's running
    jobs, the board takes their loads from the view: the same arrays as
    summing them."""
    from hrlsched.envs.board import Board

    p = pool(3)
    np_random, _ = seeding.np_random(3)
    wseed = p.draw(np_random)
    sim = p.simulation(wseed, 1, "events")
    dp = point(p.built(wseed).topology, agent_allocates=False, agent_places=True, placement="pack",
                       max_jobs=p.max_jobs(), rescue_idle=True)
    dp.reset(np_random)
    view = sim.reset(int(np_random.integers(2**31)))
    rng = np.random.default_rng(4)
    lazy = from_loads = 0

    def same_as_eager(board: Board) -> None:
        """``board`` holds the kept placements as a fresh board that sums them itself."""
        kept = [(j, pl) for j, pl in zip(view.jobs, view.placements) if j.job_id in dp.placements]
        eager = Board(view, 1, dp.profiles, dp.link_off)
        assert eager.commit_kept([j for j, _ in kept], [pl for _, pl in kept])
        for name in ("gpu_workers", "socket_ps", "link_jobs"):
            np.testing.assert_array_equal(getattr(board, name), getattr(eager, name), err_msg=name)
        for name in ("gpu_free", "cores_free", "mem_free"):
            np.testing.assert_array_equal(getattr(board.occ, name), getattr(eager.occ, name), err_msg=name)

    while view is not None:
        if dp.begin(view):
            # the kept placements committed from the engine's loads where they are all its running jobs
            n_kept = len(dp.placements)
            if n_kept and n_kept == sum(pl is not None for pl in view.placements):
                from_loads += 1
                same_as_eager(dp.board)
            more = True
            while more:
                valid = np.flatnonzero(dp.mask())
                more = dp.act(int(valid[rng.integers(valid.size)]))
        elif dp._board is None:
            lazy += 1
            kept = [(j, pl) for j, pl in zip(view.jobs, view.placements) if j.job_id in dp.placements]
            assert kept and all(pl is dp.placements[j.job_id] for j, pl in kept)
            same_as_eager(dp.board)
        view = sim.step(dp.decision()).view
    assert lazy > 0, "no point with nothing to place: the test shows nothing"
    assert from_loads > 0, "no point that commits the engine's loads: the test shows nothing"


def test_window_hint_decides_the_jobs_the_hint_runs_first() -> None:
    """``window="hint"``: with more jobs than ``max_jobs``, the jobs a point
    decides are those the hint runs first in its priority order (``Optimus``
    with ``first_order="remaining"``: the shortest first), though they
    arrived last, decided in arrival order (``"hint-order"``: in the hint's);
    in arrival order they are out of the window and never run. The
    view is permuted consistently (``ClusterView.permuted``) and the
    decision is keyed by job id."""
    from hrlsched.cluster import uniform_cluster
    from hrlsched.core import CATALOGUE
    from hrlsched.envs.candidates import WAIT
    from hrlsched.perf import OptimusModel
    from tests.helpers import job, make_view

    topo = Topology.from_spec(uniform_cluster(1, 2, sockets=1))  # two GPUs, six one-GPU jobs
    perf = OptimusModel(topo, CATALOGUE)
    jobs = [job(k, arrival=float(k), model="dssm", gpus=1, samples=1e9, batch=1024) for k in range(6)]
    view = make_view(topo, perf, jobs)
    rem = np.array([1e5, 1e5, 1e5, 1e5, 1e4, 1e3])  # the last two are the shortest, job 5 first
    got = {}
    for window in ("arrival", "hint", "hint-order"):
        dp = point(topo, agent_allocates=True, agent_places=False, max_jobs=2, hint=f"first=remaining,win={window}",
                           skip_forced=False)
        dp.reset(np.random.default_rng(0))
        dp.hint_policy.remaining_steps = lambda v: rem[[j.job_id for j in v.jobs]]  # type: ignore[union-attr]
        more = dp.begin(view)
        assert dp.hint_policy.priority(dp.hints) == [5, 4]  # type: ignore[union-attr]
        decided = [j.job_id for j in dp.view.jobs[: dp.n_dec]]  # type: ignore[union-attr]
        while more:  # a valid slot with the hint's workers, else wait
            hint = dp.hints.get(dp.view.jobs[dp.k].job_id)  # type: ignore[union-attr]
            valid = np.flatnonzero(dp.mask()[: dp.n_cand]).tolist()
            want = [c for c in valid if hint is not None and dp.table.workers[c] == hint.workers]
            more = dp.act(int(want[0]) if want else WAIT)
        got[window] = (decided, set(dp.decision().placements))
    # in arrival order the hint's jobs are out of reach: the two decided wait (the idle rescue starts one)
    assert got["arrival"][0] == [0, 1] and not got["arrival"][1] & {4, 5}
    assert got["hint"] == ([4, 5], {4, 5})  # the hint's jobs, decided in arrival order
    assert got["hint-order"] == ([5, 4], {4, 5})  # ... or in the hint's
    # the permuted view: per-job arrays and the index follow the jobs; the original is untouched
    order = [5, 4, 0, 1, 2, 3]
    pv = view.permuted(order)
    assert [j.job_id for j in pv.jobs] == order and pv.index(5) == 0 and view.index(5) == 5
    np.testing.assert_array_equal(pv.remaining, view.remaining[order])
    assert view.permuted(list(range(6))) is view
    with pytest.raises(ValueError, match="permutation"):
        view.permuted([0, 0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="window"):
        point(topo, agent_allocates=True, agent_places=False, max_jobs=2, hint="p=none,win=hint")  # no hint
    # recheck_s: each decision asks to be asked again that long after
    dp = point(topo, agent_allocates=True, agent_places=False, max_jobs=2, hint="p=none,re=600", skip_forced=False)
    dp.reset(np.random.default_rng(0))
    more = dp.begin(make_view(topo, perf, jobs, time_s=120.0))
    while more:
        more = dp.act(WAIT)
    assert dp.decision().recheck_s == 720.0
    with pytest.raises(ValueError, match="recheck_s"):
        point(topo, agent_allocates=True, agent_places=False, max_jobs=2, hint="p=none,re=0")


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_jobs_of_one_model_share_slot_speeds_unless_the_predictor_is_per_job(noise: float) -> None:
    """Slot speeds are kept per model where the predictor's speeds depend on
    a job only through its model (hundreds of new jobs price each model
    once), per job under a noisy predictor (each job its own factor)."""
    from hrlsched.sim.simulation import Simulation

    extra = [f"predictor.noise={noise}"] if noise else []
    b = WorkloadPool("default", [3], [*SMALL, *extra], transform=open_choices).built(3)
    dp = point(b.topology, agent_allocates=True, agent_places=False, max_jobs=len(b.jobs))
    sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
    view, rng = sim.reset(3), np.random.default_rng(3)
    dp.reset(rng)
    while view is not None:
        jobs = view.jobs
        pairs = [(i, k) for i in range(len(jobs)) for k in range(i + 1, len(jobs))
                 if (jobs[i].model, jobs[i].arch, jobs[i].mode, view.batch_sizes[i])
                 == (jobs[k].model, jobs[k].arch, jobs[k].mode, view.batch_sizes[k])]
        if pairs:
            break
        view = sim.step(Decision(placements={})).view
    assert pairs, "no two jobs of one model at one point"
    dp.begin(view)
    i, k = pairs[0]
    slots = np.array([2 + dp.table.size // 2])  # one worker slot past wait and keep
    bs = view.batch_sizes.tolist()
    a, b_ = dp.pricing.slot_vector(jobs[i], bs[i], slots)[slots], dp.pricing.slot_vector(jobs[k], bs[k], slots)[slots]
    assert a[0] > 0
    f = view.perf.factor if noise else {}
    ratio = f.get(jobs[i].job_id, 1.0) / f.get(jobs[k].job_id, 1.0)
    np.testing.assert_allclose(a / b_, ratio, rtol=1e-9)
    assert (dp.pricing.who(jobs[i]) == jobs[i].model) == (noise == 0) and view.perf.per_model == (noise == 0)
    if noise:
        assert abs(ratio - 1.0) > 1e-6  # the factors differ: a shared key would have been wrong


def crowded_view() -> tuple[ClusterView, dict]:
    """A view of 10 waiting jobs on 4 servers short of cores and memory (a
    server runs out of room before its GPUs), and the jobs' model profiles."""
    from hrlsched.config import resolve_run_config
    from hrlsched.core.catalogue import get_profile
    from hrlsched.scenario import build_scenario
    from hrlsched.sim.simulation import Simulation

    built = build_scenario(resolve_run_config("default", None, 0, [
        "workload.jobs=40", "workload.duration_h=0.01", "cluster.server_groups.0.count=4",
        "cluster.server_groups.0.cores_per_socket=3", "cluster.server_groups.0.memory_gb=40"]).scenario, 0)
    sim = Simulation(built.topology, built.jobs, built.perf, built.engine, predictor=built.predictor)
    view = sim.reset(0)
    while len(view.jobs) < 10:
        view = sim.step(Decision(placements={})).view
    return view, {j.model: get_profile(j.model, view.catalogue) for j in view.jobs}


def test_narrowed_gpu_mask_is_the_recomputed_one() -> None:
    """``PartialPlacement.narrow_gpu_mask`` (the mask after one more worker,
    from the last one) is ``gpu_mask()`` recomputed, also where a server runs
    out of cores or memory before its GPUs."""
    from hrlsched.envs.board import Board
    from hrlsched.envs.masks import PartialPlacement

    view, profiles = crowded_view()
    rng = np.random.default_rng(5)
    narrowed_to_server = 0
    for job in view.jobs:
        board = Board(view, 1, profiles, link_layout(view.topology)[0])
        part = PartialPlacement(board, job, view.topology.n_gpus, 0)
        m = part.gpu_mask()
        while m.any():
            g = int(rng.choice(np.flatnonzero(m)))
            part.place_worker(g)
            before = int(m.sum())
            part.narrow_gpu_mask(m, g)
            narrowed_to_server += before - int(m.sum()) > 1
            assert np.array_equal(m, part.gpu_mask())
    assert narrowed_to_server  # some server ran out of room before its GPUs


def test_sure_one_is_sure_on_one_pair() -> None:
    """``HeuristicFeasibility.sure_one`` (Python numbers) answers as ``sure``
    on one-entry arrays, for placements that fill and one that does not,
    on boards as commitments fill them up."""
    from hrlsched.envs.board import Board
    from hrlsched.envs.masks import HeuristicFeasibility
    from hrlsched.policies.registry import PLACEMENTS

    view, profiles = crowded_view()
    # pack, balance, tiresias fill (PS room rules); optimus, topology do not
    feas = [HeuristicFeasibility(PLACEMENTS[name].factory()) for name in ("pack", "balance", "tiresias", "optimus", "topology")]
    assert [f.fill for f in feas] == [True, True, True, False, False]
    board = Board(view, 1, profiles, link_layout(view.topology)[0])
    seen = set()
    for job in view.jobs:
        for f in feas:
            for w in range(1, 10):
                for p in range(4):
                    ok, ask = f.sure(board, job, np.array([w]), np.array([p]))
                    one = f.sure_one(board, job, w, p)
                    assert one == (bool(ok[0]), bool(ask.size))
                    seen.add(one)
        pl = feas[0].place(view, board, job, min(job.requested_gpus, 2), job.num_ps_requested)
        if pl is not None:
            board.commit(job, pl)
    assert len(seen) == 3  # surely placed, to ask and neither all occur


def test_fewest_servers_is_the_search_on_cumulative_capacities() -> None:
    """``masks._fewest_servers`` (a walk over the room's histogram) gives what
    a ``searchsorted`` on the roomiest-first cumulative capacities gives."""
    from hrlsched.envs.masks import _fewest_servers

    rng = np.random.default_rng(11)
    for _ in range(300):
        hist = rng.integers(0, 5, size=int(rng.integers(1, 10))).tolist()
        counts = sorted(set(rng.integers(-1, 3 + 2 * sum(hist) * len(hist), size=12).tolist()))
        caps = np.repeat(np.arange(len(hist))[::-1], hist[::-1])
        want = np.searchsorted(np.cumsum(caps), counts) + 1
        assert _fewest_servers(hist, counts) == want.tolist()


def test_menus_priced_up_front_are_the_speeds_priced_on_demand() -> None:
    """``Pricing.price_menus`` prices each new (model, batch size)'s
    whole menu at the start of a point; the speeds and the decisions are
    those of pricing each slot when a choice first asks for it."""
    from hrlsched.sim.simulation import Simulation

    b = WorkloadPool("default", [4], [*SMALL], transform=open_choices).built(4)
    runs = []
    for up_front in (True, False):
        dp = point(b.topology, agent_allocates=True, agent_places=False, max_jobs=len(b.jobs))
        if not up_front:
            dp.pricing.price_menus = lambda view, open_slots: None  # type: ignore[method-assign]
        sim = Simulation(b.topology, b.jobs, b.perf, b.engine, predictor=b.predictor)
        view = sim.reset(4)
        dp.reset(np.random.default_rng(4))
        rng = np.random.default_rng(4)
        decisions = []
        for _ in range(6):
            if view is None:
                break
            more = dp.begin(view)
            if not decisions:  # what the first point priced before any choice
                first = sum(int(np.count_nonzero(~np.isnan(v[2:]))) for v in dp.pricing.workload.slot_speeds.values())
            while more:  # as an agent: each choice's observation, then a random valid action
                obs = dp.observation()
                valid = np.flatnonzero(obs["action_mask"])
                more = dp.act(int(valid[rng.integers(valid.size)]))
            d = dp.decision()
            decisions.append((d.placements, d.arch, d.mode))
            view = sim.step(d).view
        runs.append((decisions, {k: v.copy() for k, v in dp.pricing.workload.slot_speeds.items()}, first))
    (d1, up, first_up), (d2, lazy, first_lazy) = runs
    assert d1 == d2
    assert first_up > 0 and first_lazy == 0  # up front: priced at ``begin``, before any choice asked
    assert up.keys() == lazy.keys()
    for key, v in lazy.items():
        asked = ~np.isnan(v)
        np.testing.assert_array_equal(up[key][asked], v[asked])


def test_policy_objects_are_checked_and_each_episode_runs_a_fresh_copy() -> None:
    """``DecisionPoint`` takes policy objects (names are resolved by its
    callers, ``envs.base.heuristics``): others are refused by name; the
    allocation and hint given stay as made, each episode running a copy."""
    from hrlsched.policies.optimus import Optimus
    from hrlsched.policies.placement.pack import PackPlacement

    b = pool(3).built(3)
    with pytest.raises(ValueError, match="placement: expected a job-by-job placement policy"):
        DecisionPoint(b.topology, agent_allocates=True, agent_places=False, placement="pack", max_jobs=8)
    with pytest.raises(ValueError, match="allocation: expected"):
        DecisionPoint(b.topology, agent_allocates=False, agent_places=True, placement=PackPlacement(), max_jobs=8)
    with pytest.raises(ValueError, match="hint: expected"):
        DecisionPoint(b.topology, agent_allocates=True, agent_places=False, placement=PackPlacement(), hint="optimus",
                      max_jobs=8)
    hint = Optimus(tuning=HintConfig(remaining_weight=1.0))
    dp = DecisionPoint(b.topology, agent_allocates=True, agent_places=False, placement=PackPlacement(), hint=hint,
                       max_jobs=len(b.jobs))
    first = dp.hint_policy
    dp.reset(np.random.default_rng(1))
    assert dp.hint_policy is not first and dp.hint_policy is not hint
    assert dp.hint_policy.remaining_weight == 1.0 and not hasattr(hint, "obs")  # (``Optimus.reset`` makes ``obs``)


def test_names_are_refused_with_the_expected_ones_where_they_are_resolved() -> None:
    import gymnasium as gym

    with pytest.raises(ValueError, match=r"allocation: unknown policy 'nope'; expected one of \[.*'fifo'"):
        heuristics(agent_allocates=False, allocation="nope")
    heuristics(agent_allocates=True, allocation="nope")  # (not made where the agent allocates)
    with pytest.raises(ValueError, match=r"placement: unknown placement 'nowhere'; expected one of \[.*'pack'"):
        gym.make("hrlsched/Placement-v0", placement="nowhere")
    with pytest.raises(ValueError, match=r"hint.policy: unknown allocation policy 'nope'; expected one of \[.*\] or none"):
        gym.make("hrlsched/Allocation-v0", hint="p=nope")


def test_the_decision_machinery_resolves_no_name() -> None:
    """The point and its parts take policy objects: none imports the registry."""
    from pathlib import Path

    import hrlsched.envs.decision as decision

    here = Path(decision.__file__).parent
    for name in ("decision", "pricing", "observe", "masks", "hint", "features", "board", "candidates"):
        assert "policies.registry" not in (here / f"{name}.py").read_text(), name


@pytest.mark.parametrize("kind", ["allocation", "hierarchical"])
def test_emptying_the_caches_at_every_point_changes_no_observation(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cache of a decision point is a memo: with ``CACHE_ENTRIES`` 0
    (each emptied at every point) an episode is the same."""
    import hrlsched.envs.masks as masks
    import hrlsched.envs.pricing as pricing

    cls, seed = ENVS[kind], 5
    a, job_a, fin_a = env_episode(cls, pool(seed), seed, "pack")
    monkeypatch.setattr(pricing, "CACHE_ENTRIES", 0)
    monkeypatch.setattr(masks, "CACHE_ENTRIES", 0)
    b, job_b, fin_b = env_episode(cls, pool(seed), seed, "pack")
    assert len(a) == len(b) > 0 and job_a == job_b
    for oa, ob in zip(a, b):
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)
    np.testing.assert_array_equal(fin_a, fin_b)


def test_columns_by_name() -> None:
    """Feature columns by name: a run of columns is a slice in the names'
    order; the candidate columns a choice changes; the job facts copied into
    the job rows are the features of their names."""
    from hrlsched.envs import features as F
    from hrlsched.envs.pricing import FACTS

    assert F.JOB.span("params_gb", "mode_open") == slice(12, 19) and F.JOB["hint_workers"] == 21
    with pytest.raises(ValueError, match="span: 'mode_open'"):
        F.JOB.span("mode_open", "params_gb")
    assert [F.CANDIDATE_FEATURES[c] for c in DYN_COLUMNS] == list(F.DYN_FEATURES)
    span = FACTS.span("params_gb", "mode_open")
    assert FACTS.names[span] == F.JOB_FEATURES[F.JOB.span("params_gb", "mode_open")]
