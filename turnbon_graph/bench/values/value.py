"""What scores a search's partial trajectories (`ValueFunction`), and the default one:
the value model, an LLM asked to score a partial trajectory from 0 to 10 by a rubric
(settable: `rubric`), in the hardened form of the scoring selector
(`selectors.scoring`): the same system-prompt frame, transcript rendering, answer
schema, parsing and re-ask. The others that ship: a process reward model (`prm`) and
the task's own tests (`oracle`); which one a run uses: `valuing`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from turnbon_graph._litellm.client import CompletionClient
from turnbon_graph.bench.environment import Episode
from turnbon_graph.bench.metering.budget import request_chars
from turnbon_graph.records import Usage
from turnbon_graph.selectors.model_call import Asked, ModelCaller
from turnbon_graph.selectors.prompting import (
    answer_section,
    selector_prompt,
    transcript_section,
    two_messages,
)
from turnbon_graph.selectors.scoring import (
    MAX_SCORE,
    SCORING_RETRY_PROMPT,
    parse_score,
    score_schema,
)

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

    async def score(
        self, messages: Sequence[BaseMessage], episode: Episode
    ) -> Asked[float] | float | None:
        """The score from 0 to 10 of the trajectory `messages` (its transcript, the
        prompt first), which ran in `episode`: read the episode, or fork it, but never
        change it (the trajectory goes on in it). A number when nothing was asked of a
        model; an `Asked` with what asking cost, or a None value with the `error` that
        says why there is none (a failed call, an unusable answer). A score outside 0
        to 10 counts as an unusable answer."""
        ...

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        """Characters of the request that scores `messages` (0 if none is sent): the
        token budget estimates a value call from it (`budget.request_chars`)."""
        ...


def checked_score(answer: Asked[float] | float | None) -> Asked[float]:
    """A value function's answer as an `Asked`: a number as itself, asked of no model;
    a score that is not a number from 0 to 10 an unusable answer (no score)."""
    asked = answer if isinstance(answer, Asked) else Asked(answer, None, Usage(), attempts=1)
    value = asked.value
    if value is None and asked.error is None:
        return replace(asked, error="invalid answer: no score")
    if value is not None and not (isinstance(value, int | float) and 0 <= value <= MAX_SCORE):
        problem = f"invalid answer: score {value!r} is not a number from 0 to {MAX_SCORE:g}"
        return replace(asked, value=None, error=problem)
    return replace(asked, value=None if value is None else float(value))


class ValueModel(ModelCaller):
    """Scores partial trajectories 0-10 by `rubric` (default `VALUE_RUBRIC`), one call
    each; an unusable answer is asked again once, then the score is None.

    The request is `VALUE_SYSTEM_PROMPT` with the rubric's lines in it, then the
    transcript and the answer's schema (`{"reason", "score"}`); `turnbon bench
    --value-rubric` (a spec's `rubric`) replaces the rubric.

    Args:
        model: the LiteLLM model id that scores.
        completion_kwargs: settings for its calls (its endpoint, key, ...).
        client: the client its calls go through (a search's meters them).
        rubric: the criteria it scores by, one per line; None: `VALUE_RUBRIC`.
    """

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

    async def score(
        self, messages: Sequence[BaseMessage], episode: Episode | None = None
    ) -> Asked[float]:
        return await self.ask_json(
            self.model,
            value_request(messages, self.rubric),
            kwargs=await self.answer_kwargs(self.model, "value", score_schema()),
            parse=parse_score,
            retry_prompt=lambda problem: SCORING_RETRY_PROMPT.format(error=problem),
        )
