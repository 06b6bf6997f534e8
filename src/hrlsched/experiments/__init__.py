"""Experiments: comparisons of policies over scenarios and seeds."""
