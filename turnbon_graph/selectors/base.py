"""The selector contract: given the transcript and the successful candidates, pick one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, Field

from turnbon_graph.candidates import Candidate
from turnbon_graph.records import Usage


class Selection(BaseModel):
    """A selector's choice.

    `index` is a position in the `candidates` sequence the selector was given (not the
    order it showed them to a model: a selector maps its own display order back).
    """

    index: int
    selector: str
    fallback: str | None = None
    """Why the selector's own answer was not used, or None when it was."""
    permutation: list[int] | None = None
    """Candidate indices (generation order) in the order they were displayed, if shuffled."""
    answer: str | None = None
    """The raw answer text of a model-based selector."""
    usage: Usage = Field(default_factory=Usage)


@runtime_checkable
class Selector(Protocol):
    """Anything with a `name` and an async `select` is a selector.

    `candidates` holds only successful candidates, in generation order, at least two of
    them, proposing at least two distinct actions (unanimous turns never reach a selector).
    """

    @property
    def name(self) -> str: ...

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection: ...
