"""The hierarchical RL agent: networks (``nets``), masked distributions, heuristic teachers, rollouts, behaviour cloning, PPO training (``train``), checkpoints and the ``hrl`` policy."""
