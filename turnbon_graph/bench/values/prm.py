"""A process reward model as a search's value function (`--value prm:MODEL`): a model
trained to score how well a trajectory is going, served behind any LiteLLM model id.

The request it gets is a chat of two messages, as reward models served behind a
chat-completions endpoint read a conversation: the task as the user's message (with
any follow-up user messages after it), and the agent's steps so far as the assistant's
reply, one step a block, blocks separated by `separator` (a blank line by default;
some PRMs mark the end of a step with a token of their own). A step is its text, each
tool call as `name(arguments as JSON)` and each tool result as `-> output`. No system
prompt and no instruction: the model is not asked anything, it scores what it is shown.

Its score is read from the first choice's text: the last number in it, so `0.83`,
`reward: 0.83` and `{"score": 0.83}` all read 0.83. A score on the model's own scale,
`low` to `high` (0 to 1 by default, a probability that the trajectory is on a right
path), is mapped onto 0 to 10 and clipped. A reply without a number is an unusable
answer, and is not asked again: a reward model takes no instructions.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from turnbon_graph._litellm.client import CompletionClient
from turnbon_graph._litellm.failures import describe_error
from turnbon_graph._secrets import redact, secret_values
from turnbon_graph.bench.environment import Episode
from turnbon_graph.bench.metering.budget import request_chars
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage
from turnbon_graph.selectors.model_call import Asked, ModelCaller
from turnbon_graph.selectors.prompting import answer_text
from turnbon_graph.turn.candidates import candidate_text

if TYPE_CHECKING:
    from turnbon_graph.bench.values.valuing import ValueSetup

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
STEP_SEPARATOR = "\n\n"


def prm_request(
    messages: Sequence[BaseMessage], separator: str = STEP_SEPARATOR
) -> list[dict[str, str]]:
    """The chat a process reward model scores: each user message as the user's, the
    agent's steps after it as one assistant message, a step a block (see the module)."""
    chat: list[dict[str, str]] = []
    steps: list[str] = []

    def reply() -> None:
        if steps:
            chat.append({"role": "assistant", "content": separator.join(steps)})
            steps.clear()

    for message in messages:
        if isinstance(message, HumanMessage):
            reply()
            chat.append({"role": "user", "content": candidate_text(message.content)})
        elif isinstance(message, AIMessage):
            calls = [
                f"{c['name']}({json.dumps(c['args'], sort_keys=True)})" for c in message.tool_calls
            ]
            steps.append("\n".join(p for p in [candidate_text(message.content), *calls] if p))
        elif isinstance(message, ToolMessage) and steps:
            steps[-1] += f"\n-> {candidate_text(message.content)}"
    reply()
    return chat


def read_score(text: str, low: float, high: float) -> tuple[float | None, str | None]:
    """(score from 0 to 10, problem): the last number of `text` on the scale `low` to
    `high`, mapped onto 0 to 10 and clipped."""
    found = NUMBER.findall(text or "")
    if not found:
        return None, "no number in the reward model's reply"
    raw = float(found[-1])
    return min(max((raw - low) / (high - low) * 10.0, 0.0), 10.0), None


class ProcessRewardModel(ModelCaller):
    """A reward model's score of each partial trajectory, one call each (see the module).

    Args:
        model: the LiteLLM model id it is served at.
        completion_kwargs: settings for its calls (its endpoint, key, ...).
        client: the client its calls go through (a search's meters them).
        low: the lowest score the model gives (mapped to 0).
        high: the highest score the model gives (mapped to 10).
        separator: what separates two steps in the assistant's message.

    Raises:
        ConfigurationError: `high` is not above `low`, or the model id or its settings
            are refused.
    """

    def __init__(
        self,
        model: str,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        client: CompletionClient | None = None,
        low: float = 0.0,
        high: float = 1.0,
        separator: str = STEP_SEPARATOR,
    ) -> None:
        super().__init__("ProcessRewardModel", model, completion_kwargs, client, who="reward model")
        if not high > low:
            raise ConfigurationError(
                f"a reward model's scale needs high > low, got {low:g} to {high:g}"
            )
        self.model = model
        self.low, self.high = low, high
        self.separator = separator

    @property
    def name(self) -> str:
        return f"prm:{self.model}"

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        return request_chars(prm_request(messages, self.separator))

    async def score(
        self, messages: Sequence[BaseMessage], episode: Episode | None = None
    ) -> Asked[float]:
        kwargs = self.completion_kwargs
        try:
            result = await self.client.complete(
                model=self.model, messages=prm_request(messages, self.separator), **kwargs
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            described = redact(describe_error(exc), secret_values(kwargs))
            error = f"the reward model call failed: {described}"
            return Asked(None, None, Usage(), error, 1)
        raw, text, problem = answer_text(result.response, self.who)
        answer = redact(raw, secret_values(kwargs)) if raw else raw
        if problem is None:
            value, problem = read_score(text, self.low, self.high)
            if problem is None:
                return Asked(value, answer, result.usage, attempts=1)
        return Asked(None, answer, result.usage, f"invalid answer: {problem}", 1)


def process_reward_model(setup: ValueSetup) -> ProcessRewardModel:
    """`--value prm:MODEL`: the reward model served at MODEL, on the value function's
    connection, through the search's metered client."""
    if not setup.argument:
        raise ConfigurationError(
            "--value prm needs the reward model's LiteLLM model id: --value prm:MODEL"
        )
    return ProcessRewardModel(
        setup.argument, completion_kwargs=setup.completion_kwargs, client=setup.client
    )
