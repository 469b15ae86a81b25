"""Human choice: the graph pauses with LangGraph's `interrupt()`, showing the candidates,
and resumes with the position a person picked: `Command(resume=1)`.

`create_turnbon_graph` / `create_turnbon_agent` checkpoint the candidates between their
`generate` and `select` nodes (`TurnBoNMiddleware` in a task before selecting), so
resuming (in another process, with a persistent checkpointer) re-runs only the
selection: nothing is regenerated and the person's answer applies to exactly the
candidates they were shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, Field, ValidationError, create_model

from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.base import Selection
from turnbon_graph.selectors.prompting import render_candidate
from turnbon_graph.turn.candidates import Candidate

INSTRUCTIONS = (
    "Choose the action the agent executes next. Resume the graph with "
    "Command(resume=<index>) or Command(resume={{'index': <index>}}), where <index> is "
    "the index of a candidate below, from 0 to {last}."
)


def choice_schema(n: int) -> Any:
    """What `interrupt` validates the resume value against (and shows clients as JSON
    Schema): a position in range, as an int or `{"index": i}`. A value that fails is not
    saved, so the same interrupt can be answered again."""
    position: Any = Annotated[int, Field(strict=True, ge=0, lt=n)]
    choice = create_model("HumanChoice", __config__=ConfigDict(extra="forbid"), index=position)
    return position | choice


def interrupt_payload(candidates: Sequence[Candidate]) -> dict[str, Any]:
    """What the person is shown: each candidate's action, never its private reasoning."""
    shown = []
    for position, candidate in enumerate(candidates):
        entry: dict[str, Any] = {
            "index": position,
            "candidate": candidate.index,
            "model": candidate.model,
            **render_candidate(candidate),
        }
        if candidate.votes > 1:
            entry["proposed_by"] = candidate.votes
        shown.append(entry)
    return {
        "turnbon": "choose_action",
        "instructions": INSTRUCTIONS.format(last=len(candidates) - 1),
        "candidates": shown,
    }


class HumanSelector:
    """Pauses the graph and lets a person pick the candidate to execute.

    Calls `langgraph.types.interrupt` with `interrupt_payload(candidates)` (the graph
    returns it under `__interrupt__`); resume with `Command(resume=i)` or
    `Command(resume={"index": i})`, `i` a position in the payload's `candidates`. An
    out-of-range or malformed value raises `ConfigurationError` and is not saved, so the
    same interrupt can be answered again. Needs a checkpointer (a persistent one, such as
    `langgraph-checkpoint-sqlite`'s, to resume in another process).

    Use it with `create_turnbon_graph` or `create_turnbon_agent`, whose `select` node
    re-runs alone on resume, or with `TurnBoNMiddleware`, whose candidates come from a
    LangGraph task that the checkpoint keeps. `ChatTurnBoN` generates and selects in one
    call, so a node calling it would regenerate on resume and the answer would meet new
    candidates.
    It never rejects every candidate: a rejection resamples inside the `select` node, and
    that fresh batch is not checkpointed, so the next resume would regenerate it.
    """

    name = "human"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Pauses the graph until a person answers with a candidate's position.

        Args:
            messages: not read: the person answers from the interrupt's payload.
            candidates: the payload's choices (`interrupt_payload`), by position.

        Returns:
            The position the person gave (`answer` records it).

        Raises:
            ConfigurationError: the graph was resumed with an out-of-range or malformed
                value (the same choice is still pending), or the selector runs outside a
                LangGraph graph.
            GraphInterrupt: LangGraph's pause, until the graph is resumed.
        """
        from langgraph.types import interrupt

        try:
            value = interrupt(
                interrupt_payload(candidates), response_schema=choice_schema(len(candidates))
            )
        except ValidationError as exc:
            given = exc.errors()[0].get("input")
            raise ConfigurationError(
                f"HumanSelector was resumed with {given!r}; resume with Command(resume=i) or "
                f"Command(resume={{'index': i}}), i a candidate index from 0 to "
                f"{len(candidates) - 1}. Nothing was saved: the same choice is still pending."
            ) from exc
        except RuntimeError as exc:
            if "runnable context" not in str(exc):
                raise
            raise ConfigurationError(
                "HumanSelector pauses a LangGraph graph with interrupt(): use it as the "
                "selector of create_turnbon_graph or create_turnbon_agent, compiled with a "
                "checkpointer"
            ) from exc
        index = value if isinstance(value, int) else value.index
        return Selection(index=index, selector=self.name, answer=str(index))
