"""Small fully connected networks: built in torch (``mlp``) and, frozen,
evaluated in numpy inside the engine (``NumpyMLP``)."""

from __future__ import annotations

import numpy as np
from torch import nn


def mlp(*sizes: int) -> nn.Sequential:
    """Fully connected layers of ``sizes`` (inputs, hidden..., outputs) with
    ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class NumpyMLP:
    """A frozen copy of an ``mlp`` evaluated in numpy: one decision inside the
    engine is a few small matrix products, far below torch's per-call cost."""

    def __init__(self, net: nn.Sequential) -> None:
        self.layers = [(m.weight.detach().numpy().T.astype(np.float32).copy(),
                        m.bias.detach().numpy().astype(np.float32).copy())
                       for m in net if isinstance(m, nn.Linear)]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, dtype=np.float32)
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < last:
                np.maximum(h, 0.0, out=h)
        return h
