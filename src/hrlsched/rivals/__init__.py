"""The RL schedulers of the literature rebuilt on this engine, the hrl
agent's rivals: DL2 (``dl2``, allocation) and Harmony (``harmony``,
placement), both trained by actor-critic with experience replay
(``actor_critic``, ``replay``) on the learned schedulers' common parts
(``hrlsched.agent.common``), with their shipped checkpoints
(``checkpoints/``)."""
