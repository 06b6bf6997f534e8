"""All the state of one simulation episode, in one place.

Per-job arrays are indexed by the engine's job index (jobs sorted by arrival
time, then id); ``Simulation`` owns the static per-job facts (arrival, work,
resources, restart cost) and steps this state. A fresh ``SimState`` per
``reset`` makes every episode start from the same point.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from hrlsched.core.job import Job
from hrlsched.core.placement import Placement

# Rows of ``SimState.held``: each the integral, over the time a job holds resources, of
# 1, 1 outside restarts, its workers (three times: GPU-seconds, attained service, worker-seconds),
# its PSs, its slowdown.
HELD_ROWS = ("hold_s", "prod_s", "gpu_s", "attained", "worker_s", "ps_s", "slow_s")


@dataclass(eq=False)
class SimState:
    # Clock.
    time_s: float
    round_index: int
    next_arrival: int  # index of the first job not yet admitted
    active: list[int]  # arrived, not finished, in arrival order
    dirty: bool  # a job arrived or finished since the last decision
    calls: int  # decisions applied

    # Per job: effective job (its architecture and mode as last chosen).
    jobs: list[Job]
    is_active: np.ndarray
    done: np.ndarray
    progress: np.ndarray  # samples, at full statistical efficiency
    batch: np.ndarray
    start: np.ndarray  # first start (nan: never started)
    finish: np.ndarray  # exact finish time (nan: not finished)
    restarts: np.ndarray
    gpu_s: np.ndarray
    hold_s: np.ndarray  # seconds holding resources
    worker_s: np.ndarray
    ps_s: np.ndarray
    slow_s: np.ndarray  # integral of the interference slowdown while held
    prod_s: np.ndarray  # seconds held and not paying a restart
    attained: np.ndarray  # GPU-seconds attained (Tiresias' service)
    contention: np.ndarray  # integral of the number of active jobs over the job's life
    delay_left: np.ndarray  # restart delay still to pay
    rate: np.ndarray  # progress per second (speed x statistical efficiency)
    speed: np.ndarray  # samples per second
    slowdown: np.ndarray  # speed alone at the placement / speed with the neighbours
    alone: np.ndarray  # speed alone at the current placement
    n_workers: np.ndarray
    n_ps: np.ndarray
    placements: list[Placement | None]
    running: dict[int, Placement]  # job index -> placement, for running jobs

    # Cluster occupancy.
    gpu_tasks: np.ndarray  # workers per GPU
    cores_used: np.ndarray  # per server
    mem_used: np.ndarray  # per server

    # Predictor errors (None: no error): per-job factors on predicted work.
    work_factor: np.ndarray | None = None

    # Per-round record: (time, rounds, GPUs busy, jobs queued, jobs running, mean slowdown).
    record: list[tuple[float, int, int, int, int, float]] = field(default_factory=list)
    # Time jobs spent in the system before the first decision point (given to the first step).
    pending_job_s: float = 0.0
    # The last decision's ``recheck_s`` (inf: none): under "events", a decision point too.
    recheck_s: float = math.inf
    # The per-job integrals over held time, as rows of one array (``HELD_ROWS``; the fields above
    # are its rows) so that a round adds to all of them in one operation.
    held: np.ndarray = field(default_factory=lambda: np.zeros((len(HELD_ROWS), 0)))
    # Per job, what a second held adds to each row of ``held``: 1, 1 (replaced by the time outside
    # restarts), workers (x3), PSs, slowdown (``slowdown`` is that row), set where those change.
    per_held: np.ndarray = field(default_factory=lambda: np.ones((len(HELD_ROWS), 0)))
    # Derived, kept between steps by the engine (None: to recompute, after a change): ``active`` as
    # an index array, and the running jobs' ``RunSet`` (sim.simulation).
    act_idx: np.ndarray | None = None
    run_set: object | None = None
    # Jobs finished so far (and their indices, in finish order), and the last applied decision's
    # (arch, mode, finished then): a decision with the same choices, or some of them, needs no new
    # check but for the jobs finished since (sim.validation).
    n_finished: int = 0
    finished: list[int] = field(default_factory=list)
    last_choices: tuple[dict, dict, int] | None = None

    def clone(self) -> SimState:
        """An independent copy, for running the same episode forward along
        another path (a lookahead). Every array and container is copied, and
        the rows of ``held`` (``hold_s`` ... ``slow_s``) and the ``slowdown``
        row of ``per_held`` are bound again as views of the copy's arrays: a
        plain ``deepcopy`` copies them apart, so the engine's updates of
        ``held`` would no longer show in ``attained``, and writes to
        ``slowdown`` would miss ``per_held``. The engine's derived
        ``act_idx``/``run_set`` are dropped (rebuilt at the next step). Jobs
        and placements are immutable: shared."""
        new = copy.copy(self)
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                setattr(new, f.name, v.copy())
            elif isinstance(v, (list, dict)):
                setattr(new, f.name, copy.copy(v))
        new.rebind()
        return new

    def rebind(self) -> None:
        """Bind the rows of ``held`` and the ``slowdown`` row of ``per_held``
        again as views of those arrays (after either was replaced), and drop
        the engine's derived ``act_idx``/``run_set``."""
        for i, name in enumerate(HELD_ROWS):
            setattr(self, name, self.held[i])
        self.slowdown = self.per_held[HELD_ROWS.index("slow_s")]
        self.act_idx = self.run_set = None

    @classmethod
    def initial(cls, jobs: list[Job], n_gpus: int, n_servers: int) -> SimState:
        n = len(jobs)

        def z() -> np.ndarray:
            return np.zeros(n)

        held = np.zeros((len(HELD_ROWS), n))
        per_held = np.ones((len(HELD_ROWS), n))
        per_held[2:6] = 0.0

        return cls(
            time_s=0.0, round_index=0, next_arrival=0, active=[], dirty=True, calls=0,
            jobs=list(jobs), is_active=np.zeros(n, dtype=bool), done=np.zeros(n, dtype=bool),
            progress=z(), batch=np.array([j.batch_size for j in jobs], dtype=np.int64),
            start=np.full(n, np.nan), finish=np.full(n, np.nan), restarts=np.zeros(n, dtype=np.int64),
            hold_s=held[0], prod_s=held[1], gpu_s=held[2], attained=held[3], worker_s=held[4], ps_s=held[5],
            slow_s=held[6], held=held, per_held=per_held,
            contention=z(), delay_left=z(), rate=z(), speed=z(), slowdown=per_held[6], alone=np.ones(n),
            n_workers=np.zeros(n, dtype=np.int64), n_ps=np.zeros(n, dtype=np.int64),
            placements=[None] * n, running={},
            gpu_tasks=np.zeros(n_gpus, dtype=np.int64), cores_used=np.zeros(n_servers),
            mem_used=np.zeros(n_servers),
        )
