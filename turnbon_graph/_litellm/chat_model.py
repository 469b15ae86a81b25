"""A LangChain chat model in the place of LiteLLM, for a selector that speaks through it.

`LLMSelector(ChatAnthropic(...))`, or `selector=<any BaseChatModel>` on an entry point,
asks the selection question through that model. Its calls are tagged `nostream`, so they
never reach a graph's `stream_mode="messages"` output: only the chosen action is the
agent's message.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.constants import TAG_NOSTREAM

from turnbon_graph._litellm.client import CallResult
from turnbon_graph.records import Usage

__all__ = ["ChatModelClient", "chat_model_label", "usage_of_message"]


def chat_model_label(model: BaseChatModel) -> str:
    """A name for records: the model's own name where it has one (`model_name`, `model`)."""
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return f"{model._llm_type}:{value}"
    return model._llm_type


def usage_of_message(message: BaseMessage) -> Usage:
    """Usage of one call as LangChain reports it on the message (`usage_metadata`); a
    chat model prices nothing, so the cost is unknown."""
    metadata = getattr(message, "usage_metadata", None) or {}
    details = metadata.get("output_token_details") or {}
    return Usage(
        calls=1,
        prompt_tokens=int(metadata.get("input_tokens", 0) or 0),
        completion_tokens=int(metadata.get("output_tokens", 0) or 0),
        reasoning_tokens=int(details.get("reasoning", 0) or 0),
    )


class ChatModelClient:
    """Answers `complete(model=..., messages=..., **settings)` as `LiteLLMClient` does,
    through a LangChain chat model. The settings are LiteLLM's, not the chat model's, so
    they are not sent: the selector's prompt states the answer's schema, and the answer is
    validated either way. Retries are the chat model's own (`max_retries` of its client)."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    async def complete(self, **kwargs: Any) -> CallResult:
        started = time.monotonic()
        reply = await self.model.ainvoke(kwargs["messages"], config={"tags": [TAG_NOSTREAM]})
        return CallResult(
            response=_as_completion(reply),
            usage=usage_of_message(reply),
            latency_s=time.monotonic() - started,
            attempts=1,
        )


def _as_completion(reply: BaseMessage) -> Any:
    """The reply in the shape the selectors read a LiteLLM response in."""
    refusal = reply.additional_kwargs.get("refusal") if isinstance(reply, AIMessage) else None
    finish = reply.response_metadata.get("finish_reason")
    message = SimpleNamespace(content=reply.text, refusal=refusal)
    return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason=finish)])
