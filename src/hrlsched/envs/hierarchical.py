"""``hrlsched/Hierarchical-v0``: both levels learnt.

Job after job: one action picks the job's allocation (a slot of the
candidate menu, masked to what the heuristic placement could place), then,
unless it is *wait* or *keep*, one action per task places its workers on
GPUs and its PSs on sockets; then the next job. Action space:
``Discrete(K + max_gpus + max_sockets + 1)``: the candidate slots, GPUs,
sockets, *defer* (valid only at a dead end of the placement phase); the mask
selects the segment of the current phase and the observation's ``context``
says the phase (allocate / place a worker / place a PS) and the tasks left,
``current_job`` which job.

Masks, invalid actions, reward and observation: see ``envs.base`` and
docs/environments.md.
"""

from __future__ import annotations

from hrlsched.envs.base import SchedulingEnv


class HierarchicalEnv(SchedulingEnv):
    agent_allocates = True
    agent_places = True
