"""What scores a search's partial trajectories (`ValueFunction`), and the one that ships:
the value model, a rubric prompt over a partial trajectory answered with a score from 0
to 10, in the hardened form of the scoring selector (`selectors.scoring`): the same
system-prompt frame, transcript rendering, answer schema, parsing and re-ask."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from turnbon_graph._litellm.client import CompletionClient
from turnbon_graph.bench.strategies.budget import request_chars
from turnbon_graph.selectors.model_call import Asked, ModelCaller
from turnbon_graph.selectors.prompting import (
    answer_section,
    selector_prompt,
    transcript_section,
    two_messages,
)
from turnbon_graph.selectors.scoring import SCORING_RETRY_PROMPT, parse_score, score_schema

VALUE_SITUATION = (
    "A search keeps the most promising of several attempts at the task. Score the attempt "
    "shown, as far as it has got, from 0 (it cannot succeed from here) to 10 (the task is "
    "done, with evidence), by this rubric:"
)
"""What a value request's system prompt says after the selector's role; a stub that
plays the value model recognises its requests by it (`is_value_request`)."""

VALUE_RUBRIC = """\
- Has made real, verified progress toward the task's deliverable.
- Has not damaged the working state or given up before the task was done.
- Investigates failures instead of repeating what failed.
- A final answer counts only with evidence that the task is done."""

VALUE_SYSTEM_PROMPT = selector_prompt(VALUE_SITUATION, "{rubric}")
"""A template: `.format(rubric=...)`; nothing else in it has braces."""

VALUE_RULES = "score is a number from 0 to 10: how likely this attempt is to complete the task."


def value_request(messages: Sequence[BaseMessage], rubric: str) -> list[dict[str, str]]:
    """The two messages asking for the value of the trajectory `messages`."""
    user = f"{transcript_section(messages)}\n\n{answer_section(score_schema(), VALUE_RULES)}"
    return two_messages(VALUE_SYSTEM_PROMPT.format(rubric=rubric), user)


def is_value_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a chat request's `messages` ask for a value (for stubs that play one)."""
    first = messages[0] if messages else {}
    content = first.get("content")
    return first.get("role") == "system" and isinstance(content, str) and VALUE_SITUATION in content


@runtime_checkable
class ValueFunction(Protocol):
    """What a search asks for the value of a partial trajectory: beam search keeps the
    best, particle filtering draws by it, lookahead takes the best rollout's candidate."""

    @property
    def name(self) -> str:
        """Who scores, as the report and the warnings name it (`value:<model>`)."""
        ...

    async def score(self, messages: Sequence[BaseMessage]) -> Asked[float]:
        """The trajectory's score from 0 to 10, with what asking cost; a None value
        with the `error` that says why (a failed call, an unusable answer)."""
        ...

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        """Characters of the request that scores `messages` (0 if none is sent): the
        token budget estimates a value call from it (`budget.request_chars`)."""
        ...


class ValueModel(ModelCaller):
    """Scores partial trajectories 0-10 by `rubric` (default `VALUE_RUBRIC`), one call
    each; an unusable answer is asked again once, then the score is None."""

    def __init__(
        self,
        model: str,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        client: CompletionClient | None = None,
        rubric: str | None = None,
    ) -> None:
        super().__init__("ValueModel", model, completion_kwargs, client, who="value model")
        self.model = model
        self.rubric = rubric or VALUE_RUBRIC

    @property
    def name(self) -> str:
        return f"value:{self.model}"

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        return request_chars(value_request(messages, self.rubric))

    async def score(self, messages: Sequence[BaseMessage]) -> Asked[float]:
        return await self.ask_json(
            self.model,
            value_request(messages, self.rubric),
            kwargs=await self.answer_kwargs(self.model, "value", score_schema()),
            parse=parse_score,
            retry_prompt=lambda problem: SCORING_RETRY_PROMPT.format(error=problem),
        )
