"""A Terminus answer as an action the engine can compare.

Terminus-2's model answers in free text: a JSON object with `analysis`, `plan`,
`commands` and `task_complete`. Two samples never share their analysis, so compared as
text no two candidates would ever agree. `TerminusActions` wraps the turn's generator and
parses each candidate as it arrives with Terminus-2's own parser, giving it one `terminal`
tool call that holds what it would do (keystrokes, waits, whether it says the task is
complete): candidates that would type the same keys are one action, so a unanimous turn
costs no selector call, `dedupe` and majority voting count them together, and the
selector reads the commands beside the reasoning. The text stays the message's content:
it is what the model said and what goes back into its transcript. An answer the parser
cannot read stays text (and gets Terminus-2's parse-error feedback if chosen).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from harbor.agents.terminus_2.terminus_json_plain_parser import (
    ParseResult,
    TerminusJSONPlainParser,
)

from turnbon_graph.turn.candidates import Candidate, candidate_text
from turnbon_graph.turn.generator import CandidateSource
from turnbon_harbor.options import ACTION_DURATIONS

TERMINAL_TOOL = "terminal"
"""The name of the tool call a parsed answer becomes (nothing runs it as a tool)."""


def parse_answer(text: str) -> ParseResult:
    """Terminus-2's reading of an answer: commands, completion, error and warnings."""
    return TerminusJSONPlainParser().parse_response(text)


def terminal_call(parsed: ParseResult, index: int) -> dict[str, Any]:
    """The canonical action of a parsed answer, as a tool call."""
    return {
        "name": TERMINAL_TOOL,
        "args": {
            "keystrokes": [c.keystrokes for c in parsed.commands],
            ACTION_DURATIONS: [c.duration for c in parsed.commands],
            "task_complete": parsed.is_task_complete,
        },
        "id": f"terminus-{index}",
    }


def as_action(candidate: Candidate) -> Candidate:
    """`candidate` with its answer's action as a `terminal` tool call, when it parses."""
    message = candidate.message
    if message is None or message.tool_calls:
        return candidate
    parsed = parse_answer(candidate_text(message.content))
    if parsed.error:
        return candidate
    call = terminal_call(parsed, candidate.index)
    candidate.message = message.model_copy(update={"tool_calls": [call]})
    return candidate


class TerminusActions:
    """A `CandidateSource` whose candidates are Terminus answers read as actions."""

    def __init__(self, inner: CandidateSource) -> None:
        self.inner = inner

    @property
    def label(self) -> str:
        return self.inner.label

    def model_for(self, index: int) -> str:
        return self.inner.model_for(index)

    def why_separate(self, n: int) -> str | None:
        return self.inner.why_separate(n)

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Candidate, None]:
        """The inner source's candidates, each read as an action; the arguments are the
        inner `stream`'s, passed on as they are."""
        calls = self.inner.stream(*args, **kwargs)
        async with aclosing(calls):  # closing this stream cancels the calls in flight
            async for candidate in calls:
                yield as_action(candidate)
