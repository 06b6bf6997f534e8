"""hrlsched: hierarchical-RL scheduling of deep-learning training jobs, with a
topology-aware trace-driven cluster simulator and the baselines of the field."""

__version__ = "0.1.0"
