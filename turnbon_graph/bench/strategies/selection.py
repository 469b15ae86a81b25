"""Which trajectories go on after a turn of beam search or particle filtering: pure rules
over the pool of finished and live trajectories, each testable alone.

    beam      the top `width` of the finished and the live trajectories together, by
              value; a finished one keeps its place only while it is among them, so a
              finished low-valued path never evicts a higher-valued live one. The search
              stops when the top `width` have all finished.
    particle  `width` draws, with replacement, from the finished and the live particles
              together, each with probability proportional to its copies times the
              softmax of its score normalised to [0, 1] (a score of 10 is 1) at a
              temperature. A finished particle drawn stays in the pool, as often as it
              was drawn; a live one drawn k times goes on as k copies. The search stops
              when every draw is a finished particle.

An unscored trajectory (no value: the value call failed, or nothing was compared) ranks
below every scored one in beam search and weighs as a score of 0 in particle filtering.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

SCORE_SCALE = 10.0
"""The value model's scale: scores from 0 to this."""


@dataclass(frozen=True)
class Entry:
    """One trajectory of the pool, as the rules see it."""

    value: float | None
    """The value model's score (0-10), or None when unscored."""
    finished: bool
    copies: int = 1
    """Particle filtering: the slots of the pool it fills (a finished particle drawn k
    times fills k)."""


def top_width(pool: Sequence[Entry], width: int) -> list[int]:
    """Beam search: the positions of the `width` best entries, best first. Unscored ones
    rank last; on equal values a finished one goes first (keeping it costs nothing more),
    then the earlier one."""

    def rank(position: int) -> tuple[float, bool, int]:
        entry = pool[position]
        value = -math.inf if entry.value is None else entry.value
        return (-value, not entry.finished, position)

    return sorted(range(len(pool)), key=rank)[:width]


def normalised(value: float | None) -> float:
    """A score on [0, 1]: the 0-10 score over 10, clipped; unscored is 0."""
    if value is None:
        return 0.0
    return min(max(value / SCORE_SCALE, 0.0), 1.0)


def particle_weights(pool: Sequence[Entry], temperature: float) -> list[float]:
    """Particle filtering: each entry's probability of a draw, the softmax of its
    normalised score at `temperature`, times its copies; they add up to 1."""
    if not pool:
        return []
    exponents = [normalised(e.value) / temperature for e in pool]
    top = max(exponents)
    weights = [e.copies * math.exp(x - top) for e, x in zip(pool, exponents, strict=True)]
    total = sum(weights)
    return [w / total for w in weights]


def resample(
    pool: Sequence[Entry], width: int, temperature: float, rng: random.Random
) -> Counter[int]:
    """Particle filtering: how many of `width` draws with replacement each position got
    (by `particle_weights`); positions never drawn are absent."""
    if not pool:
        return Counter()
    weights = particle_weights(pool, temperature)
    return Counter(rng.choices(range(len(pool)), weights, k=width))
