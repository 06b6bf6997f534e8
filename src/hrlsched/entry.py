"""The ``hrlsched`` console script.

``hrlsched simulate`` with plain options runs straight to the simulation
(``hrlsched.cli_simulate``) without building the typer app: typer, click and
the pydantic adapters typer makes for every option cost about a fifth of a
second of CPU, as much as the Pollux workload's whole simulation, and users
time the whole command. Anything else (``--help``, another command, an
option this parser does not know, a value it would have to convert in a way
it cannot be sure of) goes to the typer app, which parses, helps and reports
errors as always; both run the same command body.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

# simulate's options: name -> (keyword, kind). Must match hrlsched.cli.simulate.
_VALUES = {"--scenario": ("scenario", str), "--out": ("out", Path), "--policy": ("policy", str),
           "--seed": ("seed", int), "--checkpoint": ("checkpoint", Path), "--set": ("sets", list)}
_FLAGS = {"--plots": ("plots", True), "--no-plots": ("plots", False),
          "--force": ("force", True), "--no-force": ("force", False)}


def parse_simulate(args: list[str]) -> dict[str, Any] | None:
    """Keyword arguments of ``run_simulate`` from simulate's arguments, or
    None where the typer app must decide (help, errors, anything unusual)."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        name, eq, val = tok.partition("=")
        if name in _FLAGS and not eq:
            key, flag = _FLAGS[name]
            out[key] = flag
            i += 1
            continue
        if name not in _VALUES:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            val = args[i + 1]
            i += 1
        i += 1
        key, kind = _VALUES[name]
        if not val or val.startswith("-") or (key in out and kind is not list):
            return None  # an empty or dash-led value, or an option given twice: typer's rules apply
        if kind is int:
            if not (val.isascii() and val.isdigit()):
                return None
            out[key] = int(val)
        elif kind is list:
            out.setdefault(key, []).append(val)
        else:
            out[key] = kind(val)
    if "scenario" not in out or "out" not in out:
        return None
    return out


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["simulate"]:
        kwargs = parse_simulate(argv[1:])
        if kwargs is not None:
            # A simulation's arrays are small (jobs, servers): BLAS threads never pay off, and
            # OpenBLAS starting its pool at numpy's import costs ~40 ms of CPU (~80 ms wall here).
            # A user's own setting wins.
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
            # The imports make no cyclic garbage worth collecting: no collection while they run, and
            # what they made frozen out of every later one (run_simulate enables it again).
            gc.disable()
            from hrlsched.cli_simulate import run_simulate

            code = run_simulate(**kwargs)
            # The run directory is written whole and closed: the interpreter's teardown (freeing
            # every module, ~16 ms of CPU, a fourteenth of the command) is left to the OS.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    from hrlsched.cli import app

    app()


if __name__ == "__main__":  # pragma: no cover
    main()
