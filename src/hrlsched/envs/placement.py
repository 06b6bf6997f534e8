"""``hrlsched/Placement-v0``: level 1 heuristic, level 2 learnt.

At each decision point a heuristic allocation policy (``allocation``, by
name from the policy registry; default ``fifo``: the requested GPUs and one
PS, first-come first-served, no preemption) decides which jobs run with how
many workers and PSs; jobs that keep their allocation stay where they are.
The agent then places every other allocated job, one task per step: each
worker on a GPU, then each PS on a socket (autoregressive: the mask is
recomputed after each task). Action space: ``Discrete(max_gpus +
max_sockets + 1)``: GPUs, then sockets, then *defer*. Defer is valid only at
a dead end (earlier choices left the job's remaining tasks no room); the job
then waits until the next decision point. A job the heuristic placement
cannot place at all waits without asking the agent.

Masks, invalid actions, reward and observation: see ``envs.base`` and
docs/environments.md.
"""

from __future__ import annotations

from hrlsched.envs.base import SchedulingEnv


class PlacementEnv(SchedulingEnv):
    agent_allocates = False
    agent_places = True
