"""Errors that the command line catches, in a module that imports nothing, so
that ``hrlsched.cli`` can name them without loading what raises them."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


class CheckpointError(ValueError):
    """A checkpoint of a learned scheduler that cannot be used, with the reason
    (raised by ``hrlsched.agent.common.checkpoint``; here so that the policy
    registry names it without importing torch or the agent)."""
