"""Refine: pick with an inner selector, then critique the picked action once and revise it.

Self-refinement mostly hurt on open-ended tasks in *Test-Time Scaling in the Wild*
(it helped on one benchmark of five), so it is one round, not a loop, and an unchanged
action stays the candidate's own message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph._sync import sized_for_loop
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.base import Selection, Selector
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.selectors.model_call import bind_selector
from turnbon_graph.selectors.prompting import (
    answer_section,
    candidate_block,
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
    to_message,
    tools_section,
    tools_used,
)
from turnbon_graph.turn.candidates import Candidate, canonical_action

REFINE_SYSTEM_PROMPT = selector_prompt(
    "An action was chosen for its next turn; it will be executed and its result shown to "
    "the agent.",
    "Critique the action once: does it follow the task's instructions, make real progress, "
    "use the tools correctly, and avoid premature, destructive or unsupported steps? If it "
    "is already a good next step, return it unchanged. Otherwise return a revised action "
    "that fixes what is wrong; keep the revision small and concrete.",
)

REFINE_RETRY_PROMPT = WRITTEN_RETRY_PROMPT


def refine_request(
    messages: Sequence[BaseMessage],
    picked: Candidate,
    action: AIMessage,
    tools: ToolNames,
    *,
    allow_none: bool,
) -> list[dict[str, str]]:
    """The two-message critique request: the transcript, the picked action, the tools the
    candidates use, and the answer's schema."""
    schema = action_schema(
        None, allow_none=allow_none, reason="Your critique, and what you changed if anything."
    )
    rules = (
        "content and tool_calls are the action to execute: the chosen one unchanged, or "
        f"your revision. {action_rules(tools, allow_none=allow_none)}"
    )
    user = (
        f"{transcript_section(messages)}\n\n"
        "## The action chosen for the next turn\n"
        f"{candidate_block(0, picked, action)}\n\n"
        f"{tools_section(tools)}\n\n"
        f"{answer_section(schema, rules)}"
    )
    return two_messages(REFINE_SYSTEM_PROMPT, user)


class RefineSelector(ActionWriter):
    """Picks with `inner`, then asks `model` to critique that action once and revise it.

    `inner`: a Selector, a model id (an `LLMSelector` on it), or None (an `LLMSelector`
    on `model`, sharing its settings). A revised action runs as `Selection.message` (fresh
    call ids; `index` stays the inner pick); an unchanged one runs as the inner selector
    left it. If the critique call fails or answers unusably twice, the inner choice runs
    and `fallback` says why. A rejection by the inner selector is passed on unrefined.
    Usage adds both selectors' calls; `answer` holds both answers as JSON.

    Args:
        model: the LiteLLM model id that critiques and revises the inner pick.
        inner: a `Selector`, a model id (an `LLMSelector` on it), or None (an
            `LLMSelector` on `model`, sharing its settings).
        completion_kwargs: settings for `model`'s calls (and an inner `LLMSelector`
            made here).
        client: as for `LLMSelector`; an inner selector made here from a model id gets
            it too. A graph binds `inner` along with this selector, each unless it has a
            client of its own.
        seed: the seed of an inner `LLMSelector` made here.
        response_format: as for `LLMSelector` (an inner one made here gets it too).
        max_invalid_retries: how often an unusable critique is asked about again.
        allow_none: the critique may reject every candidate.

    Raises:
        ConfigurationError: `inner` is not a `Selector`, a model id or None, or the
            model id or its settings are refused (as for `LLMSelector`).
    """

    def __init__(
        self,
        model: str,
        inner: Selector | str | None = None,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        client: LiteLLMClient | None = None,
        seed: int | None = None,
        response_format: bool | None = None,
        max_invalid_retries: int = 1,
        allow_none: bool = False,
    ) -> None:
        super().__init__(
            "RefineSelector", model, completion_kwargs, client, response_format, max_invalid_retries
        )
        self.model = model
        self.allow_none = allow_none
        if inner is None or isinstance(inner, str):
            inner = LLMSelector(
                inner or model,
                completion_kwargs=self.completion_kwargs,
                client=client,
                seed=seed,
                response_format=response_format,
            )
        elif not isinstance(inner, Selector):
            raise ConfigurationError(
                f"RefineSelector's inner selector must be a Selector, a model id or None; "
                f"got {inner!r}"
            )
        self.inner: Selector = inner

    def bind_client(self, client: LiteLLMClient) -> None:
        """Binds this selector and `inner`, each unless it was given a client of its own.

        Args:
            client: the graph's client, whose limits then bound both selectors' calls.
        """
        super().bind_client(client)
        bind_selector(self.inner, client)

    @property
    def name(self) -> str:
        """`refine:<model>(<inner selector's name>)`."""
        return f"refine:{self.model}({self.inner.name})"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """The inner selector's pick, critiqued and revised once.

        Args:
            messages: what the inner selector and then the critique read.
            candidates: the inner selector's to choose from; the revision may use their tools.

        Returns:
            The inner pick, with the revised action as `message` when the revision
                changed it; the inner selection as it was (`fallback` says why) when the
                critique failed; every candidate rejected by either.
        """
        picked = await self.inner.select(messages, candidates)
        if picked.none_acceptable:
            return picked.model_copy(update={"selector": self.name})
        chosen = candidates[picked.index]
        action = picked.message or chosen.message
        assert action is not None
        tools = tools_used(candidates, picked.message)
        request = await sized_for_loop(
            messages, refine_request, messages, chosen, action, tools, allow_none=self.allow_none
        )
        asked = await self.write(request, tools, "refined_action")
        update: dict[str, Any] = {
            "selector": self.name,
            "usage": picked.usage + asked.usage,
            "answer": json.dumps({"selected_by": picked.answer, "refinement": asked.answer}),
        }
        revised = asked.value
        if revised is None:
            why = f"{asked.error}; kept the choice of {self.inner.name}"
            update["fallback"] = f"{picked.fallback}; {why}" if picked.fallback else why
        elif revised.none_acceptable:
            update["none_acceptable"] = True
        else:
            message = to_message(revised, action)
            ignore = chosen.ignore_args
            if canonical_action(message, ignore) != canonical_action(action, ignore):
                update["message"] = message
        return picked.model_copy(update=update)
