"""``hrlsched/Allocation-v0``: level 1 learnt, level 2 heuristic.

At each decision point the agent decides the active jobs one by one (arrival
order): each action picks one slot of the candidate menu
(``envs.candidates``: wait, keep, or (workers, PSs, architecture, mode)),
and the heuristic placement (``placement``, default ``pack``) places it at
once on what is left. Action space: ``Discrete(K)``, K the menu's size (38
with the default options), whatever the cluster. The observation's
``candidates`` rows describe each slot (predicted speed alone, predicted
time to finish, restart, servers the heuristic would span), so that a
network scores the slots with one shared scorer.

Masks, invalid actions, reward and observation: see ``envs.base`` and
docs/environments.md.
"""

from __future__ import annotations

from hrlsched.envs.base import SchedulingEnv


class AllocationEnv(SchedulingEnv):
    agent_allocates = True
    agent_places = False
