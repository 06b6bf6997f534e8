"""The record of the command that made an output folder: ``command.txt``,
the shell line (options as given, paths relative to where it ran) and a
comment with the hrlsched version that ran it. ``hrlsched simulate``,
``compare`` and ``evaluate`` write it beside their outputs, and ``hrlsched
report`` shows it. Light on purpose (no typer, no numpy): ``simulate``'s fast
path writes it too."""

from __future__ import annotations

from pathlib import Path

COMMAND_FILE = "command.txt"


def version() -> str:
    import hrlsched

    return hrlsched.__version__


def record_command(folder: str | Path, command: str) -> Path:
    """Write ``folder/command.txt`` whole: ``command``, then the version."""
    from hrlsched.io import write_text

    return write_text(Path(folder) / COMMAND_FILE, f"{command}\n# hrlsched {version()}\n")


def read_command(folder: str | Path) -> tuple[str, str] | None:
    """The command and the version recorded in ``folder`` (None where there
    is no ``command.txt``; a version not recorded is "")."""
    path = Path(folder) / COMMAND_FILE
    if not path.is_file():
        return None
    command, made_by = [], ""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("# hrlsched "):
            made_by = line.removeprefix("# hrlsched ").strip()
        elif line.strip() and not line.startswith("#"):
            command.append(line.strip())
    return " ".join(command), made_by
