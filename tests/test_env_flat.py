"""``hrlsched/Flat-v0``: the environment contract (check_env, spaces,
masks, invalid actions named, episodes to the end) and its one level: a
job's worker count emerges from its placement, *stop* ends it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import hrlsched.envs  # noqa: F401  (registers the environments)
from hrlsched.envs import InvalidActionError
from hrlsched.envs.flat import FlatDecisionPoint

SMALL = ["workload.jobs=10", "workload.duration_h=1", "cluster.server_groups.0.count=2"]


def make(**kw: object) -> gym.Env:
    return gym.make("hrlsched/Flat-v0", overrides=kw.pop("overrides", SMALL), **kw).unwrapped


def gpu_actions(env: gym.Env, mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask[env.place_off:env.place_off + env.max_gpus])


def test_check_env_on_the_default_construction() -> None:
    check_env(gym.make("hrlsched/Flat-v0").unwrapped)


def test_random_episode_in_space_runs_to_the_end() -> None:
    env = make()
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=1)
    done, steps = False, 0
    while not done:
        assert env.observation_space.contains(obs)
        assert np.array_equal(obs["action_mask"].astype(bool), info["action_mask"])
        part = env.dp.part
        if part is not None and part.placing_worker:  # stop is always a choice while workers are placed
            assert info["action_mask"][env.defer_action]
        obs, r, te, tr, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        assert r <= 0.0
        done, steps = te or tr, steps + 1
    assert te and info["invalid_actions"] == 0
    sim = env._sim
    assert len(sim.state.finished) == len(sim.jobs)  # every job ran to completion


def test_workers_emerge_from_placement_and_stop_ends_them() -> None:
    env = make(invalid_action="raise")
    _, info = env.reset(seed=0)
    dp = env.dp
    job = dp.part.job
    for _ in range(3):  # three workers, then stop
        env.step(int(env.place_off + gpu_actions(env, env.dp.mask())[0]))
        assert dp.part is not None and dp.part.placing_worker
    env.step(env.defer_action)
    if job.arch == "ps":  # then its one PS (the first PS rule, one), on a socket
        assert dp.part is not None and not dp.part.placing_worker and dp.part.n_ps == 1
        mask = dp.mask()
        assert not mask[env.defer_action] and not gpu_actions(env, mask).size
        env.step(int(np.flatnonzero(mask)[0]))
    pl = dp.placements.get(job.job_id) if dp.view is not None and dp.placements else None
    placed = pl if pl is not None else env._sim.state.placements.get(job.job_id)
    assert placed is not None and placed.n_workers == 3 and placed.n_ps == (1 if job.arch == "ps" else 0)


def test_stop_before_any_worker_makes_the_job_wait() -> None:
    env = make(invalid_action="raise")
    env.reset(seed=0)
    dp = env.dp
    for _ in range(200):  # one worker each, until a job comes up beside placed ones (no idle rescue then)
        part = dp.part
        if part.placing_worker and not part.gpus and dp.placements:
            job = part.job.job_id
            env.step(env.defer_action)
            sim = env._sim
            index = [j.job_id for j in sim.jobs].index(job)
            assert job not in dp.placements and sim.state.placements[index] is None
            assert dp.rescues == 0
            return
        mask = dp.mask()
        env.step(env.defer_action if part.placing_worker and part.gpus else int(np.flatnonzero(mask)[0]))
    pytest.fail("no point with a job beside placed ones")


def test_the_menu_caps_the_workers() -> None:
    env = make(invalid_action="raise", worker_options=[1, 2])
    env.reset(seed=0)
    dp = env.dp
    k = dp.k
    for _ in range(2):
        env.step(int(env.place_off + gpu_actions(env, dp.mask())[0]))
    # the second worker ended the workers: a PS now, or the next job
    assert dp.k != k or (dp.part is not None and not dp.part.placing_worker)


def test_invalid_actions_raise_naming_what_was_expected() -> None:
    env = make(invalid_action="raise")
    env.reset(seed=0)
    sock = env.place_off + env.max_gpus
    with pytest.raises(InvalidActionError, match="expected a GPU for the job's next worker, or stop"):
        env.step(sock)
    with pytest.raises(InvalidActionError, match="out of range"):
        env.step(env.action_space.n)
    taken = env.place_off + gpu_actions(env, env.dp.mask())[0]
    env.step(int(taken))
    with pytest.raises(InvalidActionError, match=f"GPU {taken - env.place_off} cannot take a worker"):
        env.step(int(taken))  # the same GPU again


def test_forbidden_action_by_default_is_counted_and_the_job_waits() -> None:
    env = make()
    env.reset(seed=0)
    dp = env.dp
    job = dp.view.jobs[dp.k]
    env.step(int(env.place_off + gpu_actions(env, dp.mask())[0]))
    _, _, _, _, info = env.step(env.place_off + env.max_gpus)  # a socket while a worker is placed
    assert info["invalid_actions"] == 1
    # its one worker dropped; alone at the point, the idle rescue then starts it at its request
    pl = dp.placements.get(job.job_id)
    assert info["idle_rescues"] == 1 and pl is not None and pl.n_workers == job.requested_gpus > 1


def test_a_flat_point_refuses_the_levels_it_does_not_have() -> None:
    env = make()
    with pytest.raises(ValueError, match="agent_allocates=False"):
        FlatDecisionPoint(env.topo, agent_allocates=True, agent_places=True, placement=env.placement_policy,
                          max_jobs=4)
    with pytest.raises(ValueError, match="ps_options"):
        FlatDecisionPoint(env.topo, agent_allocates=False, agent_places=True, placement=env.placement_policy,
                          max_jobs=4, ps_options=())


def test_episode_reproducible() -> None:
    def run() -> list[float]:
        env = make()
        rng = np.random.default_rng(5)
        _, info = env.reset(seed=2)
        out, done = [], False
        while not done:
            _, r, te, tr, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            out.append(r)
            done = te or tr
        return out

    assert run() == run()
