"""The level-1 action menu: a fixed, padded list of allocation candidates
(workers, PSs, architecture, mode) that every job is offered.

Slot 0 is *wait* (no workers: the job waits, or a running job is
preempted); slot 1 is *keep* (a running job keeps its allocation and
placement, so it is not restarted); then, for each architecture, mode and
worker count of ``worker_options``, one slot per PS rule of ``ps_options``
(parameter-server architecture) or one slot with no PS (all-reduce). The
slots mean the same thing for every job and every cluster, so a network
scores them with one shared scorer (Decima-style) and no output layer is
sized by the cluster; slots a job cannot use (a fixed architecture or mode,
a repeated PS count) are masked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hrlsched.contract import ARCHS, MODES

WAIT, KEEP = 0, 1
WORKER_OPTIONS = (1, 2, 4, 8, 16, 32)  # the menu's worker counts unless told otherwise
PS_RULES = ("one", "half", "equal")


def ps_count(rule: str, workers: int) -> int:
    """PSs of a parameter-server candidate: one, half the workers (rounded up),
    or as many as workers."""
    if rule == "one":
        return 1
    if rule == "half":
        return max(1, math.ceil(workers / 2))
    if rule == "equal":
        return workers
    raise ValueError(f"ps_options: expected rules among {list(PS_RULES)}, got {rule!r}")


@dataclass(frozen=True)
class CandidateTable:
    """Per slot: workers (0 for wait and keep), PSs, architecture index
    (into ``ARCHS``; -1 for wait/keep), mode index (into ``MODES``)."""

    workers: np.ndarray
    ps: np.ndarray
    arch: np.ndarray
    mode: np.ndarray
    duplicate: np.ndarray  # the same (workers, ps, arch, mode) as an earlier slot

    @property
    def size(self) -> int:
        return int(self.workers.size)


def make_table(worker_options: Sequence[int], ps_options: Sequence[str], max_gpus: int) -> CandidateTable:
    ws = sorted({int(w) for w in worker_options if 1 <= int(w) <= max_gpus})
    if not ws:
        raise ValueError(f"worker_options: expected worker counts in 1..{max_gpus}, got {list(worker_options)}")
    for r in ps_options:
        ps_count(r, 1)  # names the bad rule
    if not ps_options:
        raise ValueError("ps_options: expected at least one PS rule")
    rows = [(0, 0, -1, -1), (0, 0, -1, -1)]
    for ai, arch in enumerate(ARCHS):
        for mi, _ in enumerate(MODES):
            for w in ws:
                if arch == "ps":
                    rows += [(w, ps_count(r, w), ai, mi) for r in ps_options]
                else:
                    rows.append((w, 0, ai, mi))
    a = np.array(rows, dtype=np.int64)
    seen: set[tuple[int, ...]] = set()
    dup = np.zeros(len(rows), dtype=bool)
    for k, r in enumerate(rows[2:], start=2):
        # never offered: a repeat, or asynchronous all-reduce (a ring is a
        # collective; the engine refuses it)
        dup[k] = r in seen or (ARCHS[r[2]] == "allreduce" and MODES[r[3]] == "async")
        seen.add(r)
    return CandidateTable(a[:, 0], a[:, 1], a[:, 2], a[:, 3], dup)


def nearest_slot(t: CandidateTable, valid: np.ndarray, workers: int, ps: int, arch_i: int, mode_i: int,
                 keep: bool) -> int:
    """The menu slot nearest to an allocation of ``workers``/``ps`` with
    architecture and mode indices ``arch_i``/``mode_i`` among the ``valid``
    slots (bool): *keep* when ``keep`` (the allocation is the job's current
    one) and keep is valid, *wait* for no workers or no valid slot of that
    architecture and mode; else the largest worker count not above
    ``workers`` (else the smallest above), then the nearest PS count."""
    if workers < 1:
        return WAIT
    if keep and valid[KEEP]:
        return KEEP
    ok = valid.copy()
    ok[:2] = False
    ok &= (t.arch == arch_i) & (t.mode == mode_i)
    if not ok.any():
        return WAIT
    c = np.flatnonzero(ok)
    below = c[t.workers[c] <= workers]
    if below.size:
        c = below[t.workers[below] == t.workers[below].max()]
    else:
        c = c[t.workers[c] == t.workers[c].min()]
    return int(c[np.argmin(np.abs(t.ps[c] - ps))])
