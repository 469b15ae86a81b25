"""Fusion: a model shown every candidate writes the one action to execute.

In a compute-normalised comparison of test-time-scaling families on open-ended tasks
(*Test-Time Scaling in the Wild*, docs/references.md), synthesis across candidates was the only one
that consistently beat a single sample, while reward-model selection was near random.
As there, the candidates are shown shuffled and without their reasoning, and the model
synthesises in one shot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph._sync import sized_for_loop
from turnbon_graph.selectors.base import Selection, fall_back
from turnbon_graph.selectors.prompting import (
    answer_section,
    candidates_section,
    seeded_order,
    selector_prompt,
    transcript_section,
    two_messages,
)
from turnbon_graph.selectors.written import (
    WRITTEN_RETRY_PROMPT,
    ActionWriter,
    ToolNames,
    action_rules,
    action_schema,
    closest,
    to_message,
    tools_section,
    tools_used,
)
from turnbon_graph.turn.candidates import Candidate

FUSION_SYSTEM_PROMPT = selector_prompt(
    "For its next turn, several candidate actions were proposed. Instead of picking one, "
    "you write the single action that will be executed; its result will be shown to the "
    "agent.",
    "Synthesise the best next action from the candidates: keep what the strongest ones get "
    "right, fix their mistakes, and combine complementary parts when that makes one better "
    "step. Prefer actions that follow the task's instructions exactly, make real progress, "
    "and verify recent work; avoid premature, destructive or unsupported ones. If one "
    "candidate is already the best possible step, reproduce it exactly.",
)

FUSION_RETRY_PROMPT = WRITTEN_RETRY_PROMPT


def fusion_request(
    messages: Sequence[BaseMessage],
    shown: Sequence[Candidate],
    tools: ToolNames,
    *,
    allow_none: bool,
) -> list[dict[str, str]]:
    """The two-message fusion request: the transcript, the candidates in display order, the tools
    they use, and the answer's schema."""
    schema = action_schema(None, allow_none=allow_none, reason="One or two sentences on how.")
    user = (
        f"{transcript_section(messages)}\n\n"
        f"{candidates_section(shown)}\n\n"
        f"{tools_section(tools)}\n\n"
        f"{answer_section(schema, action_rules(tools, allow_none=allow_none))}"
    )
    return two_messages(FUSION_SYSTEM_PROMPT, user)


class FusionSelector(ActionWriter):
    """One LLM call shown all candidates (shuffled, seeded) writes the action to execute.

    The answer is `{"reason", "content", "tool_calls": [{"name", "args"}]}`, checked
    against the tools and argument names the candidates use. The written action runs as
    `Selection.message`, each tool call with a fresh id, and `index` names the candidate
    it is closest to; when it reproduces a candidate's action exactly, that candidate runs
    itself (keeping its reasoning for providers that replay it). An unusable answer is
    asked about once more; then, or if the call fails, it falls back to majority/first.

    Note: a written action carries no private reasoning; providers that require the
    reasoning of a tool-calling turn to be replayed (extended thinking) may reject it.

    Args:
        model: the LiteLLM model id that writes the action.
        completion_kwargs: settings for its calls.
        client: as for `LLMSelector` (without one, a graph binds it to the graph's
            client).
        seed: seeds the shuffled order the candidates are shown in.
        response_format: as for `LLMSelector`.
        max_invalid_retries: how often an unusable answer is asked about again.
        allow_none: the model may reject every candidate instead of writing an action.

    Raises:
        ConfigurationError: the model id or its settings are refused (as for
            `LLMSelector`).
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
        super().__init__(
            "FusionSelector", model, completion_kwargs, client, response_format, max_invalid_retries
        )
        self.model = model
        self.allow_none = allow_none
        self.seed = seed

    @property
    def name(self) -> str:
        """`fusion:<model>`."""
        return f"fusion:{self.model}"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Asks the model to write the action, shown every candidate.

        Args:
            messages: the transcript the model reads before the candidates.
            candidates: every one shown; the action written is matched back to them.

        Returns:
            The written action as `message`, `index` the candidate closest to it (that
                candidate alone when the action is its own); every candidate rejected
                (`allow_none`); the majority or the first, with `fallback`, when no
                usable answer came.
        """
        order = seeded_order(candidates, self.seed)
        shown = [candidates[p] for p in order]
        tools = tools_used(candidates)
        request = await sized_for_loop(
            messages, fusion_request, messages, shown, tools, allow_none=self.allow_none
        )
        asked = await self.write(request, tools, "fused_action")
        common: dict[str, Any] = {
            "selector": self.name,
            "permutation": [c.index for c in shown],
            "answer": asked.answer,
            "usage": asked.usage,
        }
        action = asked.value
        if action is None:
            return fall_back(candidates, asked.error or "no answer", **common)
        if action.none_acceptable:
            return Selection(index=0, none_acceptable=True, **common)
        position, same = closest(candidates, to_message(action, None))
        if same:  # nothing new: run the candidate itself, reasoning and all
            return Selection(index=position, **common)
        message = to_message(action, candidates[position].message)
        return Selection(index=position, message=message, **common)
