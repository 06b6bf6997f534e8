"""Command modules of the ``hrlsched`` CLI, one per topic (calibrate, trace,
compare, ...). Each defines ``register(app)``; ``hrlsched.cli`` registers them
all, so adding a command never touches another topic's module."""

from __future__ import annotations

import importlib
import pkgutil

import typer


def register_all(app: typer.Typer) -> None:
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{mod}").register(app)
