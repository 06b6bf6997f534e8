"""Errors that the command line catches, in a module that imports nothing, so
that ``hrlsched.cli`` can name them without loading what raises them."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""
