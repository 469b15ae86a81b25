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
        return Selection(index=0, selector=self.name)


class RandomSelector:
    """A uniformly random candidate: the control that isolates the value of choosing well."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        return Selection(index=self._rng.randrange(len(candidates)), selector=self.name)


class MajorityVoteSelector:
    """The plurality canonical action (self-consistency); ties go to the earliest candidate."""

    name = "majority"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        return Selection(index=plurality_position(candidates), selector=self.name)
