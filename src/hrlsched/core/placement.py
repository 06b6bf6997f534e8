"""Where one job's tasks run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Placement:
    """GPU index of every worker and CPU-socket index of every parameter server.

    Hashable, so performance models cache speeds per placement signature.
    All-reduce jobs have no PS.
    """

    gpus: tuple[int, ...]
    ps_sockets: tuple[int, ...] = ()

    @classmethod
    def of(cls, gpus: object, ps_sockets: object = ()) -> Placement:
        return cls(_ints(gpus), _ints(ps_sockets))

    @property
    def n_workers(self) -> int:
        return len(self.gpus)

    @property
    def n_ps(self) -> int:
        return len(self.ps_sockets)

    def canonical(self) -> Placement:
        """Order-free form: two placements with the same sets compare equal
        (the placement itself when it is already in that form)."""
        g, p = tuple(sorted(self.gpus)), tuple(sorted(self.ps_sockets))
        if g == self.gpus and p == self.ps_sockets:
            return self
        return Placement(g, p)


def _ints(x: object) -> tuple[int, ...]:
    if isinstance(x, np.ndarray) and x.ndim <= 1 and x.dtype.kind in "iu":
        return tuple(x.ravel().tolist())  # the common cases (an index array, a tuple of ints) without numpy
    if type(x) is tuple and all(type(v) is int for v in x):
        return x
    return tuple(int(v) for v in np.atleast_1d(x))
