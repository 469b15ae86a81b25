"""A scripted model that replays BFCL's ground truth, for `StubServer`.

For each user turn it answers with the turn's ground-truth calls as tool calls (all in
one step, or `calls_per_step` at a time), then with a short text that ends the turn. It
reads everything it needs from the request (the user messages so far, the assistant
steps since the last one), so any number of episodes and candidates can share it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turnbon_bfcl.errors import ReplayError
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.testing import CapturedRequest, chat_completion, is_selector_request, tool_call

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class ReplayScript:
    """One entry: its user turns and, per turn, the calls to make."""

    turns: list[str]
    calls: list[list[Call]]


class GroundTruthReplay:
    """A StubServer responder: `stub.script(GroundTruthReplay(scripts))`."""

    def __init__(
        self,
        scripts: Mapping[str, ReplayScript],
        *,
        calls_per_step: int | None = None,
        answer: str = "Done.",
    ) -> None:
        if calls_per_step is not None and calls_per_step < 1:
            raise ConfigurationError(
                f"calls_per_step must be a whole number >= 1, or None for one step per turn; "
                f"got {calls_per_step!r}"
            )
        self.scripts = dict(scripts)
        self.calls_per_step = calls_per_step
        self.answer = answer

    def __call__(self, request: CapturedRequest) -> dict[str, Any]:
        if is_selector_request(request):  # Turn-BoN with N > 1: candidates agree anyway
            return chat_completion(json.dumps({"reason": "replay", "selected_index": 0}))
        messages: list[dict[str, Any]] = list((request.body or {}).get("messages") or [])
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not users:
            raise ReplayError("the request has no user message: send a BFCL task's turns")
        said = [_text(messages[i].get("content")) for i in users]
        turn_calls = self._calls_for(said)
        steps_done = sum(
            1
            for m in messages[users[-1] + 1 :]
            if m.get("role") == "assistant" and m.get("tool_calls")
        )
        size = self.calls_per_step or max(len(turn_calls), 1)
        chunk = turn_calls[steps_done * size : (steps_done + 1) * size]
        if not chunk:
            return chat_completion(self.answer)
        return chat_completion(tool_calls=[tool_call(name, args) for name, args in chunk])

    def _calls_for(self, said: list[str]) -> list[Call]:
        """The current turn's calls of the entries whose user turns start with `said`
        (two BFCL entries may share a first turn; they must then agree on it)."""
        turn = len(said) - 1
        options = {
            json.dumps(script.calls[turn], sort_keys=True): script.calls[turn]
            for script in self.scripts.values()
            if script.turns[: len(said)] == said
        }
        if len(options) != 1:
            found = "no entry" if not options else "entries that disagree"
            raise ReplayError(
                f"{found} for user turns {said!r}: replay only the tasks of the environment "
                "whose stub_policy() made this responder"
            )
        return next(iter(options.values()))


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")
