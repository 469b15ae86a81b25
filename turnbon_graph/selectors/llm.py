"""The paper's selector (Figure 6): one LLM call with two messages that returns `selected_index`.

The request is a fixed system prompt and one user message holding the transcript, the
candidate actions (never their private reasoning) in a seeded shuffled order, and the
JSON schema of the answer, all rendered by `selectors.prompting`. The tournament and the
ensemble selectors ask their questions through `LLMSelector.ask`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from turnbon_graph._litellm.chat_model import ChatModelClient, chat_model_label
from turnbon_graph._litellm.client import CompletionClient, LiteLLMClient
from turnbon_graph._sync import sized_for_loop
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.base import Selection, fall_back
from turnbon_graph.selectors.model_call import Asked, ModelCaller, check_llm_options
from turnbon_graph.selectors.prompting import (
    answer_section,
    candidates_section,
    parse_reply,
    render_candidate,
    render_message,
    retry_prompt,
    seeded_order,
    selector_prompt,
    transcript_section,
    two_messages,
)
from turnbon_graph.turn.candidates import Candidate

__all__ = [
    "NONE_ACCEPTABLE",
    "RETRY_PROMPT",
    "SELECTOR_SYSTEM_PROMPT",
    "LLMSelector",
    "SelectorAnswer",
    "answer_schema",
    "as_llm_selector",
    "build_request",
    "parse_answer",
    "render_candidate",
    "render_message",
]

SELECTOR_SYSTEM_PROMPT = selector_prompt(
    "For its next turn, several candidate actions were proposed; exactly one will be "
    "executed, and its result will be shown to the agent.",
    "Choose the candidate most likely to lead to a correct and complete solution. Prefer "
    "actions that follow the task's instructions exactly, make real progress toward the "
    "deliverable, test or verify recent work, and investigate failures instead of repeating "
    "an action that just failed. Avoid actions that are premature, destructive, or that "
    "declare success without evidence.",
)

RETRY_PROMPT = retry_prompt(", with selected_index one of the candidate numbers {valid}.")

NONE_ACCEPTABLE = -1
"""The `selected_index` that rejects every candidate, where `allow_none` offers it."""


class SelectorAnswer(BaseModel):
    """What the selector must answer; `reason` is optional on input."""

    reason: str = ""
    selected_index: int


def _valid(n: int, allow_none: bool) -> list[int]:
    return [*range(n), NONE_ACCEPTABLE] if allow_none else list(range(n))


def answer_schema(
    n: int, allow_none: bool = False, max_reason_chars: int | None = None
) -> dict[str, Any]:
    """The JSON schema of a selector's answer: a reason and `selected_index` among the `n` shown
    (or -1, with `allow_none`)."""
    reason: dict[str, Any] = {"type": "string", "description": "One or two sentences on why."}
    if max_reason_chars is not None:
        reason["maxLength"] = max_reason_chars
    return {
        "type": "object",
        "properties": {
            "reason": reason,
            "selected_index": {"type": "integer", "enum": _valid(n, allow_none)},
        },
        "required": ["reason", "selected_index"],
        "additionalProperties": False,
    }


def build_request(
    messages: Sequence[BaseMessage], shown: Sequence[Candidate], *, allow_none: bool = False
) -> list[dict[str, str]]:
    """The two-message selector request, with `shown` in display order."""
    rule = f"selected_index is the index of the candidate you choose, from 0 to {len(shown) - 1}."
    if allow_none:
        rule += (
            f" If no candidate is acceptable (each would be wrong, harmful or a wasted turn), "
            f"answer {NONE_ACCEPTABLE}: the agent then proposes new candidates."
        )
    user = (
        f"{transcript_section(messages)}\n\n"
        f"{candidates_section(shown)}\n\n"
        f"{answer_section(answer_schema(len(shown), allow_none), rule)}"
    )
    return two_messages(SELECTOR_SYSTEM_PROMPT, user)


def parse_answer(
    response: Any, n: int, allow_none: bool = False
) -> tuple[int | None, str, str | None]:
    """(display index or None, raw text, error). Never raises on a bad answer.

    With `allow_none`, `NONE_ACCEPTABLE` (-1) is a valid index: every candidate rejected."""
    answer, raw, problem = parse_reply(
        response, SelectorAnswer, "a JSON object with an integer selected_index"
    )
    if answer is None:
        return None, raw, problem
    if answer.selected_index not in _valid(n, allow_none):
        return None, raw, f"selected_index {answer.selected_index} is out of range 0..{n - 1}"
    return answer.selected_index, raw, None


class LLMSelector(ModelCaller):
    """Asks an LLM to pick the best candidate, as in the paper (Figure 6).

    On an unusable answer (not JSON, no `selected_index`, out of range, a refusal) it
    asks once more with the problem stated; if that fails too, or the call itself fails,
    it falls back to majority vote when one action has a strict plurality, else to the
    first candidate, and says why in `Selection.fallback`.

    Args:
        model: a LiteLLM model id, or any LangChain chat model (`ChatOpenAI`,
            `ChatAnthropic`, `init_chat_model(...)`): the question then goes through it
            instead of LiteLLM, with its own settings and retries (`completion_kwargs`
            do not apply).
        completion_kwargs: settings for its calls (`temperature`, `api_base`,
            `api_key`, ...).
        client: the client its calls go through. Without one, a graph binds it to the
            graph's client (`bind_client`), so `max_concurrency` and `rate_limit` bound it.
        seed: seeds the shuffled order the candidates are shown in (with their actions),
            so a run is reproducible however turns interleave.
        shuffle: show the candidates in that seeded shuffled order; False: in generation
            order.
        response_format: True sends a strict JSON-schema `response_format`, False never
            does, None (default) does so where LiteLLM says the model supports it.
        max_invalid_retries: how often an unusable answer is asked about again, the
            problem stated, before falling back.
        allow_none: the model may answer `selected_index: -1` to reject every candidate
            (the turn then resamples once, then falls back).
        max_reason_chars: a `maxLength` on the reason in the `response_format` schema,
            for small models whose grammar-constrained reason would otherwise run to
            `max_tokens` (strict OpenAI schemas do not accept `maxLength`: leave it None
            there).

    Raises:
        ConfigurationError: `model` is neither a model id nor a chat model,
            `completion_kwargs` are given with a chat model, or they set what the
            selector sets itself (`model`, `messages`, `tools`, `n`).
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        client: CompletionClient | None = None,
        seed: int | None = None,
        shuffle: bool = True,
        response_format: bool | None = None,
        max_invalid_retries: int = 1,
        allow_none: bool = False,
        max_reason_chars: int | None = None,
    ) -> None:
        if isinstance(model, BaseChatModel):
            if completion_kwargs:
                raise ConfigurationError(
                    "LLMSelector on a chat model takes no completion_kwargs: configure the "
                    "chat model itself (temperature, max_tokens, ...)"
                )
            client, model = ChatModelClient(model), chat_model_label(model)
        super().__init__(
            "LLMSelector", model, completion_kwargs, client, response_format, max_invalid_retries
        )
        self.model = model
        self.seed = seed
        self.shuffle = shuffle
        self.allow_none = allow_none
        self.max_reason_chars = max_reason_chars

    @property
    def name(self) -> str:
        """`llm:<model>`."""
        return f"llm:{self.model}"

    def display_order(self, candidates: Sequence[Candidate]) -> list[int]:
        """Positions in display order: a shuffle seeded by the selector's seed and the
        candidates' actions, so a run is reproducible however turns interleave.

        Args:
            candidates: the candidates to show.

        Returns:
            Their positions in the order to show them (generation order without
                `shuffle`).
        """
        if not self.shuffle:
            return list(range(len(candidates)))
        return seeded_order(candidates, self.seed)

    async def ask(self, messages: Sequence[BaseMessage], shown: Sequence[Candidate]) -> Asked[int]:
        """One question about `shown`, in that order, re-asked on an unusable answer.
        Never falls back (the tournament and the ensemble ask through it).

        Args:
            messages: the transcript the candidates answered.
            shown: the candidates, in the order to show them.

        Returns:
            The display index chosen (or `NONE_ACCEPTABLE`), the raw answer and the usage;
                no index, and the problem, when no usable answer came.
        """
        n = len(shown)
        schema = answer_schema(n, self.allow_none, self.max_reason_chars)
        return await self.ask_json(
            self.model,
            await sized_for_loop(
                messages, build_request, messages, shown, allow_none=self.allow_none
            ),
            kwargs=await self.answer_kwargs(self.model, "selection", schema),
            parse=lambda response: parse_answer(response, n, self.allow_none),
            retry_prompt=lambda problem: RETRY_PROMPT.format(
                error=problem, valid=_valid(n, self.allow_none)
            ),
        )

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Asks the model, with the candidates in display order.

        Args:
            messages: the transcript the model reads before the candidates.
            candidates: shown numbered in `display_order`; the answer names one.

        Returns:
            The candidate the model chose, or every candidate rejected (`allow_none`);
                the majority or the first candidate, with `fallback`, when no usable
                answer came. `permutation` is the display order.
        """
        order = self.display_order(candidates)
        asked = await self.ask(messages, [candidates[p] for p in order])
        common: dict[str, Any] = {
            "selector": self.name,
            "permutation": [candidates[p].index for p in order],
            "answer": asked.answer,
            "usage": asked.usage,
        }
        if asked.value is None:
            return fall_back(candidates, asked.error or "no answer", **common)
        if asked.value == NONE_ACCEPTABLE:
            return Selection(index=0, none_acceptable=True, **common)
        return Selection(index=order[asked.value], **common)


def as_llm_selector(
    judge: str | LLMSelector,
    *,
    owner: str,
    completion_kwargs: dict[str, Any] | None = None,
    client: LiteLLMClient | None = None,
    response_format: bool | None = None,
    allow_none: bool = False,
    shuffle: bool = True,
) -> LLMSelector:
    """The judge a composite selector asks: an `LLMSelector` on a model id, or one given
    ready-made (then configure it through its own constructor)."""
    if isinstance(judge, LLMSelector):
        if completion_kwargs is not None or response_format is not None or allow_none:
            raise ConfigurationError(
                f"{owner} was given an LLMSelector and judge options: set completion_kwargs, "
                "response_format and allow_none on that LLMSelector instead"
            )
        return judge
    return LLMSelector(
        judge,
        completion_kwargs=check_llm_options(owner, judge, completion_kwargs),
        client=client,
        response_format=response_format,
        allow_none=allow_none,
        shuffle=shuffle,
    )
