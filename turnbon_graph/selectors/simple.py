"""Selectors that call no model: the N=1 baseline, the random control, and majority vote."""

from __future__ import annotations

import random
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from turnbon_graph.selectors.base import Selection
from turnbon_graph.turn.candidates import Candidate, plurality_position


class FirstSelector:
    """Always the first candidate: with n=1 this is the plain agent (the paper's baseline)."""

    name = "first"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """The first candidate.

        Args:
            messages: not read.
            candidates: only the first is looked at.

        Returns:
            Position 0.
        """
        return Selection(index=0, selector=self.name)


class RandomSelector:
    """A uniformly random candidate: the control that isolates the value of choosing well."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        """A selector with its own random generator.

        Args:
            seed: makes its choices reproducible; None seeds from the system.
        """
        self._rng = random.Random(seed)

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """A uniformly random candidate.

        Args:
            messages: not read.
            candidates: one is drawn, uniformly, by the selector's generator.

        Returns:
            A random position.
        """
        return Selection(index=self._rng.randrange(len(candidates)), selector=self.name)


class MajorityVoteSelector:
    """The plurality canonical action (self-consistency); ties go to the earliest candidate."""

    name = "majority"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """The first candidate of the most proposed canonical action.

        Args:
            messages: not read.
            candidates: grouped by canonical action (`canonical_action`).

        Returns:
            That candidate's position (counting `votes` when the turn deduplicates).
        """
        return Selection(index=plurality_position(candidates), selector=self.name)
