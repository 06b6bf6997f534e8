"""Instructions that measured episodes of an environment take, counted by
valgrind's callgrind: a figure that does not move with the load of a shared
machine, where timings of the same code move by up to 1.5x within minutes,
so that a change of a few percent shows.

    .venv/bin/python benchmarks/env_instructions.py [--env hrlsched/Placement-v0] [--episodes 2] [--src DIR]

The same child process runs twice under callgrind: the imports, the
environment on ``default`` (workload seed 0), a warm-up episode (action seed
100, as ``env_speed.py``), then 0 and N measured episodes (action seeds 0, 1,
...); the difference is what the N episodes take. Address randomisation off
(``setarch -R``, where there is one), one BLAS thread and a fixed hash seed
make repeated runs agree within about 1 M instructions (of some 1,500 M for
two ``Placement-v0`` episodes). ``--src`` imports another checkout's
``src/`` (the code before a change, measured the same way). Needs valgrind;
about a minute for two ``Placement-v0`` episodes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(env_id: str, episodes: int) -> None:
    import gymnasium as gym

    import hrlsched.envs  # noqa: F401

    sys.path.insert(0, str(HERE))
    from env_speed import episode

    env = gym.make(env_id, scenario="default", seeds=[0]).unwrapped
    episode(env, 100)
    for seed in range(episodes):
        episode(env, seed)


def count(env_id: str, episodes: int, src: Path) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, str(Path(__file__).resolve()),
           "--child", str(episodes), "--env", env_id]
    setarch = shutil.which("setarch")
    if setarch:
        cmd = [setarch, os.uname().machine, "-R", *cmd]
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or m is None:
        raise SystemExit(f"callgrind run failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="hrlsched/Placement-v0")
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--src", type=Path, default=HERE.parent / "src", help="the source tree to import")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.env, args.child)
        return
    if shutil.which("valgrind") is None:  # (not an error: ``make bench`` runs every script)
        print("env_instructions.py: skipped, valgrind is not installed (it counts instructions with callgrind)")
        return
    src = args.src.resolve()
    base = count(args.env, 0, src)
    more = count(args.env, args.episodes, src)
    print(f"{args.env} default, {args.episodes} measured episodes after a warm-up, code from {src}: "
          f"{(more - base) / 1e6:,.0f} M instructions ({(more - base) / 1e6 / args.episodes:,.0f} M an episode; "
          f"the imports and the warm-up {base / 1e6:,.0f} M)")


if __name__ == "__main__":
    main()
