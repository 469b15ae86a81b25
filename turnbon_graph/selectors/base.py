"""The selector contract: given the transcript and the successful candidates, pick one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, Field

from turnbon_graph.records import Usage
from turnbon_graph.turn.candidates import Candidate, fallback_choice


class Selection(BaseModel):
    """A selector's choice."""

    index: int
    """A position in the `candidates` the selector was given (not the order it showed
    them to a model: a selector maps its own display order back)."""
    selector: str
    """The selector's name, as the turn record keeps it."""
    fallback: str | None = None
    """Why the selector's own answer was not used, or None when it was."""
    permutation: list[int] | None = None
    """Candidate indices (generation order) in the order they were displayed, if shuffled."""
    answer: str | None = None
    """The raw answer text of a model-based selector."""
    usage: Usage = Field(default_factory=Usage)
    """What the selector's calls cost."""
    scores: list[float | None] | None = None
    """Per-candidate scores of a scoring selector, by position in `candidates`."""
    none_acceptable: bool = False
    """The selector rejected every candidate: the turn resamples once, then falls back."""
    message: AIMessage | None = None
    """An action the selector wrote itself (fusion, refinement), executed instead of
    `candidates[index]`; `index` then names the candidate it was built from."""


@runtime_checkable
class Selector(Protocol):
    """Anything with a `name` and an async `select` is a selector.

    `candidates` holds only successful candidates, in generation order, at least two of
    them, proposing at least two distinct actions (unanimous turns never reach a selector).
    A selector may reject them all (`none_acceptable=True`), score them (`scores`), or
    write the action itself (`message`).
    """

    @property
    def name(self) -> str:
        """How the turn record names the selector (`TurnRecord.selector`)."""
        ...

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Chooses among `candidates`.

        Args:
            messages: the transcript the candidates answered (the turn's prompt first).
            candidates: the successful candidates, in generation order: at least two,
                proposing at least two distinct actions.

        Returns:
            The choice: `index`, a position in `candidates`; or `none_acceptable`, every
                candidate rejected; with `scores` or a written `message` where the
                selector makes them, and what its calls cost.
        """
        ...


def fall_back(candidates: Sequence[Candidate], why: str, **fields: Any) -> Selection:
    """The choice when a selector's own answer cannot be had: majority vote when one
    action has a strict plurality, else the first candidate; `fallback` says why."""
    index, rule = fallback_choice(candidates)
    return Selection(index=index, fallback=f"{why}; fell back to {rule}", **fields)
