"""Experience replay of DL2 and Harmony: the newest samples, drawn uniformly
in minibatches."""

from __future__ import annotations

import numpy as np


class ReplayBuffer:
    """The most recent ``capacity`` samples (first in, first out), drawn
    uniformly in minibatches. A sample is a row of each named array."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.data: dict[str, np.ndarray] = {}
        self.size = 0
        self.pos = 0

    def add(self, **rows: np.ndarray) -> None:
        n = len(next(iter(rows.values())))
        if n == 0:
            return
        if not self.data:
            self.data = {k: np.zeros((self.capacity, *np.asarray(v).shape[1:]), dtype=np.asarray(v).dtype)
                         for k, v in rows.items()}
        if n >= self.capacity:  # only the newest fit
            rows = {k: np.asarray(v)[-self.capacity:] for k, v in rows.items()}
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        for k, v in rows.items():
            self.data[k][idx] = v
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, size=min(int(n), self.size))
        return {k: v[idx] for k, v in self.data.items()}
