"""Fusion: a model shown every candidate writes the one action to execute.

In a compute-normalised comparison of test-time-scaling families on open-ended tasks
(`shared/seeds/004_0cd7b162cf94b3f4.txt`), synthesis across candidates was the only one
that consistently beat a single sample, while reward-model selection was near random.
As there, the candidates are shown shuffled and without their reasoning, and the model
synthesises in one shot.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from turnbon_graph.candidates import Candidate, fallback_choice
from turnbon_graph.client import LiteLLMClient
from turnbon_graph.selectors.base import Selection
from turnbon_graph.selectors.prompting import (
    DATA_NOT_INSTRUCTIONS,
    SELECTOR_ROLE,
    ClientBound,
    ask_json,
    candidates_section,
    check_llm_options,
    seeded_order,
    transcript_section,
    with_response_format,
)
from turnbon_graph.selectors.written import (
    ToolNames,
    action_rules,
    action_schema,
    closest,
    parse_action,
    to_message,
    tools_used,
)

FUSION_SYSTEM_PROMPT = f"""\
{SELECTOR_ROLE} An AI agent is working on a task. \
For its next turn, several candidate actions were proposed. Instead of picking one, you \
write the single action that will be executed; its result will be shown to the agent.

Synthesise the best next action from the candidates: keep what the strongest ones get \
right, fix their mistakes, and combine complementary parts when that makes one better \
step. Prefer actions that follow the task's instructions exactly, make real progress, \
and verify recent work; avoid premature, destructive or unsupported ones. If one \
candidate is already the best possible step, reproduce it exactly.

{DATA_NOT_INSTRUCTIONS} Reply with a single JSON object that \
matches the schema at the end of the user message, and nothing else."""

FUSION_RETRY_PROMPT = (
    "Your answer could not be used: {error}. Reply again with only the JSON object "
    "(reason, content, tool_calls), following the rules stated above."
)


def fusion_request(
    messages: Sequence[BaseMessage],
    shown: Sequence[Candidate],
    tools: ToolNames,
    *,
    allow_none: bool,
) -> list[dict[str, str]]:
    schema = action_schema(tools, allow_none=allow_none, reason="One or two sentences on how.")
    user = (
        f"{transcript_section(messages)}\n\n"
        f"{candidates_section(shown)}\n\n"
        "## Your answer\n"
        "Reply with one JSON object that matches this JSON schema, and nothing else:\n"
        f"{json.dumps(schema)}\n"
        f"{action_rules(tools, allow_none=allow_none)}"
    )
    return [
        {"role": "system", "content": FUSION_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


class FusionSelector(ClientBound):
    """One LLM call shown all candidates (shuffled, seeded) writes the action to execute.

    The answer is `{"reason", "content", "tool_calls": [{"name", "args"}]}`, checked
    against the tools and argument names the candidates use. The written action runs as
    `Selection.message`, each tool call with a fresh id, and `index` names the candidate
    it is closest to; when it reproduces a candidate's action exactly, that candidate runs
    itself (keeping its reasoning for providers that replay it). An unusable answer is
    asked about once more; then, or if the call fails, it falls back to majority/first.

    Note: a written action carries no private reasoning; providers that require the
    reasoning of a tool-calling turn to be replayed (extended thinking) may reject it.

    `client`: as for `LLMSelector` (without one, a graph binds it to the graph's client).
    """

    def __init__(
        self,
        model: str,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        client: LiteLLMClient | None = None,
        seed: int | None = None,
        response_format: bool | None = None,
        max_invalid_retries: int = 1,
        allow_none: bool = False,
    ) -> None:
        self.completion_kwargs = check_llm_options("FusionSelector", model, completion_kwargs)
        self.model = model
        self._use_client(client)
        self.seed = seed
        self.response_format = response_format
        self.max_invalid_retries = max_invalid_retries
        self.allow_none = allow_none

    @property
    def name(self) -> str:
        return f"fusion:{self.model}"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        order = seeded_order(candidates, self.seed)
        shown = [candidates[p] for p in order]
        tools = tools_used(candidates)
        kwargs = with_response_format(
            self.completion_kwargs,
            model=self.model,
            setting=self.response_format,
            name="fused_action",
            schema=action_schema(tools, allow_none=self.allow_none, reason=""),
            strict=False,
        )
        asked = await ask_json(
            self.client,
            model=self.model,
            request=fusion_request(messages, shown, tools, allow_none=self.allow_none),
            kwargs=kwargs,
            parse=lambda response: parse_action(response, tools, self.allow_none),
            retry_prompt=lambda problem: FUSION_RETRY_PROMPT.format(error=problem),
            max_invalid_retries=self.max_invalid_retries,
        )
        common: dict[str, Any] = {
            "selector": self.name,
            "permutation": [c.index for c in shown],
            "answer": asked.answer,
            "usage": asked.usage,
        }
        action = asked.value
        if action is None:
            index, rule = fallback_choice(candidates)
            return Selection(index=index, fallback=f"{asked.error}; fell back to {rule}", **common)
        if action.none_acceptable:
            return Selection(index=0, none_acceptable=True, **common)
        position, same = closest(candidates, to_message(action, None))
        if same:  # nothing new: run the candidate itself, reasoning and all
            return Selection(index=position, **common)
        message = to_message(action, candidates[position].message)
        return Selection(index=position, message=message, **common)
