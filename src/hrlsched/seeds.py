"""Seeds written as text on the command line: ``0-19``, ``0,3,5``, or both
(``0-4,10``), for every command that takes seeds (evaluate, train, tune)."""

from __future__ import annotations


def parse_seeds(text: str) -> list[int]:
    """``0-19`` (a range, both ends included), ``0,3,5``, or both mixed
    (``0-4,10``) -> the seeds, in order; ValueError naming what is wrong."""
    expected = "expected seeds as a range or a list of integers >= 0, e.g. 0-19 or 0,3,5"
    seeds: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        lo, dash, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if dash else a
        except ValueError:
            raise ValueError(f"--seeds {text!r}: {part!r} is not a seed or a range; {expected}") from None
        if a < 0 or b < 0 or not lo.strip().isdigit():
            raise ValueError(f"--seeds {text!r}: {part!r}: {expected}")
        if b < a:
            raise ValueError(f"--seeds {text!r}: the range {part!r} ends before it starts")
        seeds.extend(range(a, b + 1))
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise ValueError(f"--seeds {text!r}: seed(s) {', '.join(map(str, dup))} named more than once")
    return seeds


def seeds_text(seeds: list[int]) -> str:
    """The shortest ``parse_seeds`` text for ``seeds``."""
    parts, i = [], 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        parts.append(str(seeds[i]) if j == i else f"{seeds[i]}-{seeds[j]}")
        i = j + 1
    return ",".join(parts)
