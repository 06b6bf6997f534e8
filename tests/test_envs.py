"""The Gymnasium environments: check_env, masks never allow an infeasible
action (hypothesis), clear errors, reproducibility, vector envs, reward."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hrlsched.envs  # noqa: F401  (registers the environments)
from hrlsched.core.job import Job
from hrlsched.envs import InvalidActionError, WorkloadPool
from hrlsched.envs.candidates import KEEP, WAIT
from hrlsched.envs.decision import ALLOCATE
from hrlsched.envs.features import Rows

IDS = ("hrlsched/Allocation-v0", "hrlsched/Placement-v0", "hrlsched/Hierarchical-v0")
SMALL = ["workload.jobs=10", "workload.duration_h=1", "cluster.server_groups.0.count=2"]


def open_choices(jobs: list[Job], rng: np.random.Generator) -> list[Job]:
    """Leave the architecture and/or the mode of about half the jobs to the scheduler."""
    out = []
    for j in jobs:
        a, m = rng.random() < 0.5, rng.random() < 0.3
        out.append(dataclasses.replace(j, arch_open=a, mode_open=m))
    return out


def run_random(env: gym.Env, seed: int, steps: int | None = None) -> tuple[list[float], list[dict], dict]:
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    rewards, observations = [], [obs]
    done, n = False, 0
    while not done and (steps is None or n < steps):
        valid = np.flatnonzero(info["action_mask"])
        assert valid.size >= 1
        obs, r, te, tr, info = env.step(int(rng.choice(valid)))
        rewards.append(r)
        observations.append(obs)
        done, n = te or tr, n + 1
    return rewards, observations, info


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_on_the_default_construction(env_id: str) -> None:
    """gymnasium's checker passes with no argument: its determinism check
    steps an action sampled before its reset, which the default
    ``invalid_action="fallback"`` takes (the job waits, or is deferred)."""
    check_env(gym.make(env_id).unwrapped)


@pytest.mark.parametrize("env_id", IDS)
def test_observations_in_space_and_masks_agree(env_id: str) -> None:
    env = gym.make(env_id, overrides=SMALL).unwrapped
    _, observations, _ = run_random(env, 3, steps=60)
    for obs in observations:
        assert env.observation_space.contains(obs)
        assert obs["action_mask"].sum() >= 1
    assert np.array_equal(env.action_masks(), observations[-1]["action_mask"].astype(bool))


def check_masks(env: gym.Env) -> None:
    """The masks of the current sub-step against the slow way: every allowed
    candidate is one the heuristic placement places now (asked for it), and,
    for the deterministic placements, every candidate it places is allowed;
    *keep* is allowed exactly when the running placement fits the board; the
    GPU and socket rows kept up to date action after action equal rows
    computed afresh."""
    dp = env.dp
    if dp.phase == ALLOCATE and dp.agent_allocates and 0 <= dp.k < dp.n_dec:
        view, k, t, board = dp.view, dp.k, dp.table, dp.board
        cur, cur_pl = view.jobs[k], view.placements[k]
        valid = dp.mask()[: t.size].astype(bool)
        assert valid[WAIT]
        assert valid[KEEP] == (cur_pl is not None and board.occ.fits(cur, cur_pl))
        exact = dp.placement_policy.name in ("pack", "balance")
        for c in dp.masks.slots(cur, dp.base_jobs[cur.job_id]).tolist():
            if not (valid[c] or exact):
                continue
            pl = dp.feas.policy.place_job(view, board.occ, dp.pricing.slot_job(cur, c), int(t.workers[c]), int(t.ps[c]))
            placed = pl is not None and pl.n_workers == t.workers[c] and pl.n_ps == t.ps[c] \
                and len(set(pl.gpus)) == pl.n_workers and board.occ.fits(cur, pl)
            assert placed == valid[c] if exact else placed, (c, valid[c], pl)
    obs = dp.observation()
    rows = Rows(dp.topo, dp.max_gpus, dp.max_sockets, dp.max_tasks)
    rows.point(dp.view)
    rows.rewrite(dp.board, dp.part)
    np.testing.assert_array_equal(obs["gpus"], rows.gpus)
    np.testing.assert_array_equal(obs["sockets"], rows.sockets)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env_id=st.sampled_from(IDS),
    jobs=st.integers(2, 12),
    servers=st.integers(1, 3),
    gpus_per_switch=st.integers(1, 2),
    share=st.integers(1, 2),
    cores=st.sampled_from([24, 5, 3]),
    placement=st.sampled_from(["pack", "balance", "random"]),
    seed=st.integers(0, 10_000),
)
def test_masked_actions_never_fail(env_id: str, jobs: int, servers: int, gpus_per_switch: int, share: int,
                                   cores: int, placement: str, seed: int) -> None:
    """Random small scenarios (CPU cores per socket from plenty to too few
    for PSs) and random masked actions: no valid action raises, the engine
    accepts every decision (it validates each one), and the masks agree with
    the placement asked the slow way (``check_masks``)."""
    pool = WorkloadPool("default", [seed], [f"workload.jobs={jobs}", "workload.duration_h=0.5", "cluster.racks=1",
                                            f"cluster.server_groups.0.count={servers}",
                                            f"cluster.server_groups.0.gpus_per_switch={gpus_per_switch}",
                                            f"cluster.server_groups.0.cores_per_socket={cores}",
                                            "workload.gpu_counts=[1,2,4]", "workload.gpu_probs=[0.5,0.3,0.2]"],
                        transform=open_choices)
    env = gym.make(env_id, pool=pool, placement=placement, max_tasks_per_gpu=share, max_decisions=40).unwrapped
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    done, rewards = env._done, []  # done at reset: no job could ever be placed, nothing to choose
    while not done:
        check_masks(env)
        valid = np.flatnonzero(info["action_mask"])
        _, r, te, tr, info = env.step(int(rng.choice(valid)))
        rewards.append(r)
        done = te or tr
    assert info["invalid_actions"] == 0
    assert all(np.isfinite(rewards))


@pytest.mark.parametrize("env_id", IDS)
def test_unmasked_action_raises_clear_error(env_id: str) -> None:
    env = gym.make(env_id, overrides=SMALL, invalid_action="raise").unwrapped
    _, info = env.reset(seed=0)
    invalid = np.flatnonzero(~info["action_mask"])
    assert invalid.size
    with pytest.raises(InvalidActionError, match=f"action {invalid[-1]}"):
        env.step(int(invalid[-1]))
    with pytest.raises(InvalidActionError, match="out of range"):
        env.step(env.action_space.n)


@pytest.mark.parametrize("env_id", IDS)
def test_unmasked_action_by_default_is_counted_and_the_job_waits(env_id: str) -> None:
    """By default an action the mask forbids is counted and the job waits:
    at an allocation choice, the step is that of *wait*."""
    a, b = (gym.make(env_id, overrides=SMALL).unwrapped for _ in range(2))
    _, info = a.reset(seed=0)
    b.reset(seed=0)
    invalid = int(np.flatnonzero(~info["action_mask"])[-1])
    allocating = a.phase == ALLOCATE
    got = a.step(invalid)
    assert got[4]["invalid_actions"] == 1
    if allocating:
        want = b.step(WAIT)
        for k in want[0]:
            np.testing.assert_array_equal(got[0][k], want[0][k], err_msg=k)
        assert got[1:4] == want[1:4]
    assert env_id == "hrlsched/Placement-v0" or allocating



def test_the_hint_reaches_the_point_and_bad_settings_are_named() -> None:
    from hrlsched.policies.hint import HintConfig

    env = gym.make("hrlsched/Allocation-v0", overrides=SMALL, hint="a=1,r=hint,re=600").unwrapped
    env.reset(seed=0)
    assert env.dp.hint_policy.remaining_weight == 1.0 and env.dp.reserve_running == "hint"
    assert env.dp.recheck_s == 600.0 and env.hint == HintConfig(remaining_weight=1.0, reserve_running="hint",
                                                                  recheck_s=600.0)
    with pytest.raises(ValueError, match="unknown setting 'speed'"):
        gym.make("hrlsched/Allocation-v0", overrides=SMALL, hint="speed=2")
    with pytest.raises(ValueError, match="takes no options"):
        gym.make("hrlsched/Allocation-v0", overrides=SMALL, hint=HintConfig(policy="drf", remaining_weight=1.0))
    with pytest.raises(ValueError, match="unknown allocation policy 'nope'"):
        gym.make("hrlsched/Allocation-v0", overrides=SMALL, hint="p=nope")
    assert gym.make("hrlsched/Allocation-v0", overrides=SMALL).unwrapped.dp.hint_policy is None  # no hint


@pytest.mark.parametrize("env_id", IDS)
def test_episode_reproducible(env_id: str) -> None:
    a = run_random(gym.make(env_id, overrides=SMALL, seeds=[0, 1, 2]).unwrapped, 7)
    b = run_random(gym.make(env_id, overrides=SMALL, seeds=[0, 1, 2]).unwrapped, 7)
    assert len(a[0]) == len(b[0])
    np.testing.assert_allclose(a[0], b[0], rtol=1e-9)
    for oa, ob in zip(a[1], b[1]):
        for k in oa:
            np.testing.assert_allclose(oa[k], ob[k], rtol=1e-6, atol=1e-9)


def test_async_vector_env_steps() -> None:
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("hrlsched/Allocation-v0", overrides=SMALL)] * 2)
    try:
        obs, info = envs.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(5):
            acts = [int(rng.choice(np.flatnonzero(m))) for m in obs["action_mask"]]
            obs, r, te, tr, info = envs.step(np.array(acts))
            assert r.shape == (2,)
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", IDS)
def test_reward_sum_is_minus_total_jct(env_id: str) -> None:
    env = gym.make(env_id, overrides=SMALL, reward_jobs=5.0).unwrapped
    rewards, _, _ = run_random(env, 1)
    res = env._sim.result()
    assert np.all(np.isfinite(res.finish_s)), "the small workload finishes"
    jct = float(np.sum(res.finish_s - np.array([j.arrival_s for j in res.jobs])))
    assert sum(rewards) == pytest.approx(-jct / (3600 * 5.0), rel=1e-9)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_an_episode_is_the_same_after_others_in_the_env(env_id: str, noise: float) -> None:
    """What an environment keeps between episodes (caches of the workload's
    jobs, of placements, the performance model's) changes no episode: one
    after others on the same workloads equals one in a fresh environment,
    with an exact predictor and with a noisy one (a new predictor each
    episode, so no predicted speed may outlive its episode)."""
    def make() -> gym.Env:
        return gym.make(env_id, overrides=[*SMALL, "workload.jobs=16", f"predictor.noise={noise}"],
                        seeds=[0]).unwrapped  # one workload: every episode meets what the others left

    env = make()
    for seed in (3, 4, 5):
        run_random(env, seed)
    after = run_random(env, 6)
    fresh = run_random(make(), 6)
    assert after[0] == fresh[0]
    assert len(after[1]) == len(fresh[1])
    for oa, ob in zip(after[1], fresh[1]):
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)
