"""Output directories of runs: checked before any simulation starts, so that a
wrong ``--out`` fails in a second, not after the run, and an earlier run is
never silently mixed with a new one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# What a run writes; ``--force`` removes these and nothing else.
RUN_FILES = ("config.yaml", "jobs.csv", "rounds.csv", "summary.json", "jct_cdf.png", "timeline.png", "command.txt")


class OutputDirError(ValueError):
    """An output directory that cannot or must not be written."""


def check_writable(out: Path) -> None:
    """Prove that ``out`` can be created and written, without creating it (a
    run that fails later leaves nothing behind): a probe file is made and
    removed in ``out`` or, when it does not exist yet, its nearest existing
    parent."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"--out {out}: is an existing file; expected a directory (new or a run directory)")
    probe_dir = out
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise OutputDirError(f"--out {out}: {probe_dir} is a file, so the directory cannot be made")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test.", dir=probe_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputDirError(f"--out {out}: cannot write there ({e.strerror or e})") from None


def prepare_run_dir(out: str | Path, config_yaml: str, force: bool = False) -> None:
    """Make ``out`` ready for a run whose resolved config is ``config_yaml``.

    A new or empty directory is fine, and so is the directory of a run of the
    same config (re-running it gives the same files). Any other non-empty
    directory is refused unless ``force``, which removes the files an earlier
    run wrote; a directory holding other files is never cleared."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"--out {out}: is an existing file; expected a directory (new or a run directory)")
    if out.is_dir():
        present = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
        if present:
            same = (out / "config.yaml").is_file() and (out / "config.yaml").read_text(errors="replace") == config_yaml
            others = [n for n in present if n not in RUN_FILES]
            if force:
                if others:
                    raise OutputDirError(
                        f"--out {out}: holds files that are not a run's ({', '.join(others[:5])}); "
                        "refusing to clear it: choose another directory"
                    )
                for n in present:
                    (out / n).unlink()
            elif not same:
                what = "a run of another config" if (out / "config.yaml").is_file() else "not a run directory"
                raise OutputDirError(
                    f"--out {out}: not empty ({what}); choose a new directory, or pass --force to replace the "
                    "earlier run's files"
                )
            else:  # same config: stale plots of the earlier run must not outlive this one
                for n in ("jct_cdf.png", "timeline.png"):
                    (out / n).unlink(missing_ok=True)
    check_writable(out)
