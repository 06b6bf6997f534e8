"""Masked categorical distributions (torch, for training; numpy, for the
decisions inside the engine).

The mask lives inside the distribution: logits of forbidden actions are
replaced by ``-inf`` *before* the softmax, and the same masked logits are
used in the loss (log-probabilities and entropy), so no probability mass
and no gradient goes to an invalid action. (DL2 masked after the softmax
and trained on the unmasked outputs; Decima's additive mask left some mass
on invalid actions.)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


class MaskedCategorical:
    """A batch of categoricals over ``logits`` (B, A) restricted to ``mask``
    (B, A, bool; at least one true per row)."""

    def __init__(self, logits: Tensor, mask: Tensor) -> None:
        mask = mask.bool()
        if not bool(mask.any(-1).all()):
            raise ValueError("MaskedCategorical: a row of the mask allows no action")
        self.mask = mask
        self.logits = torch.where(mask, logits, torch.full_like(logits, float("-inf")))
        self.log_p = torch.log_softmax(self.logits, -1)

    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        p = self.log_p.exp()
        a = torch.multinomial(p, 1, generator=generator).squeeze(-1)
        assert bool(self.mask.gather(-1, a.unsqueeze(-1)).all()), "sampled a masked action"
        return a

    def greedy(self) -> Tensor:
        return self.logits.argmax(-1)

    def log_prob(self, a: Tensor) -> Tensor:
        return self.log_p.gather(-1, a.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, among: Tensor | None = None) -> Tensor:
        """The entropy over the valid actions; with ``among`` (bool, (A,) or
        (B, A)), of the distribution conditioned on the action being among
        those (their probabilities renormalised; 0 where none is valid):
        neither its value nor its gradient depends on the other actions'
        logits, so a bonus on it moves no probability onto them."""
        mask, log_p = self.mask, self.log_p
        if among is not None:
            mask = mask & among.bool()
            some = mask.any(-1, keepdim=True)
            z = torch.where(mask, self.logits, torch.full_like(self.logits, float("-inf")))
            # a row with none of ``among`` valid: all -inf would be nan; a finite row then counts for nothing
            log_p = torch.log_softmax(torch.where(some, z, torch.zeros_like(z)), -1)
        p = log_p.exp()
        # masked actions contribute nothing; their -inf log-probabilities are
        # replaced before the product so that neither value nor gradient is nan
        lp = torch.where(mask, log_p, torch.zeros_like(log_p))
        return -(p * lp).sum(-1)


def masked_logits(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """-inf on the masked actions, before any softmax (DL2's code masked the
    probabilities after it): ``MaskedCategorical``'s rule in numpy, for the
    decisions made inside the engine."""
    return np.where(mask, logits, -np.inf)


def masked_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    z = masked_logits(logits, mask)
    z = z - z.max()
    p = np.exp(z)
    return p / p.sum()
