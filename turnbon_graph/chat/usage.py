"""What a `ChatTurnBoN` call cost, booked per model.

The returned message carries the generator calls' usage (all N candidates, with cached
prompt tokens in `input_token_details.cache_read`) under the generator's `model_name`.
The selector's calls are reported as a separate LLM run, a child of the model's run,
whose message names the selector's model: LangChain's `UsageMetadataCallbackHandler`
(`get_usage_metadata_callback()`) books each message's `usage_metadata` under its
`response_metadata["model_name"]`, so the two land under their own models, and their
sum is what the turn cost. The split stays in the turn record (`usage`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult

from turnbon_graph.records import TurnRecord, Usage
from turnbon_graph.selectors.base import Selector
from turnbon_graph.turn.engine import turn_record

__all__ = [
    "SELECTOR_RUN_NAME",
    "areport_selector",
    "chat_result",
    "report_selector",
    "selector_model",
    "usage_metadata",
]

SELECTOR_RUN_NAME = "turnbon_selector"
"""Name (and tag) of the LLM run that reports a turn's selector calls."""


def usage_metadata(usage: Usage) -> UsageMetadata:
    """LangChain's usage record of `usage`."""
    return {
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "input_token_details": {"cache_read": usage.cached_tokens},
        "output_token_details": {"reasoning": usage.reasoning_tokens},
    }


def chat_result(message: AIMessage) -> ChatResult:
    """The chosen message with the generator calls' usage, under a model name (the
    provider's, or the chosen candidate's model id where the reply named none)."""
    record = turn_record(message)
    if record is not None:
        metadata = dict(message.response_metadata)
        if not metadata.get("model_name"):
            metadata["model_name"] = record.candidates[record.selected_index].model
        message = message.model_copy(
            update={
                "usage_metadata": usage_metadata(record.usage.generator),
                "response_metadata": metadata,
            }
        )
    return ChatResult(generations=[ChatGeneration(message=message)])


def selector_model(selector: Selector) -> str:
    """The name the selector's usage is booked under: its model id, else its name."""
    model = getattr(selector, "model", None)
    return model if isinstance(model, str) and model else selector.name


_Manager = TypeVar("_Manager", CallbackManager, AsyncCallbackManager)


def _selector_run(
    run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun,
    manager_class: type[_Manager],
    result: ChatResult,
    model: str,
) -> tuple[_Manager, dict[str, Any], LLMResult] | None:
    """The selector's run: callbacks for a child run of the model's run (an LLM run
    manager has no `get_child`), tagged `SELECTOR_RUN_NAME`, what it starts with and
    its result. None when no selector call was made (a unanimous turn, an agreement
    commit, a selector that calls no model)."""
    record: TurnRecord | None = turn_record(result.generations[0].message)
    if record is None or record.usage.selector.calls == 0:
        return None
    tags = [*run_manager.inheritable_tags, SELECTOR_RUN_NAME]
    manager = manager_class(
        handlers=run_manager.inheritable_handlers,
        inheritable_handlers=run_manager.inheritable_handlers,
        parent_run_id=run_manager.run_id,
        tags=tags,
        inheritable_tags=run_manager.inheritable_tags,
        metadata=run_manager.inheritable_metadata,
        inheritable_metadata=run_manager.inheritable_metadata,
    )
    start = {
        "serialized": {"name": SELECTOR_RUN_NAME, "id": ["turnbon_graph", SELECTOR_RUN_NAME]},
        "prompts": [f"{record.selector} chose among {record.n_ok} candidates"],
        "invocation_params": {"model": model},
        "name": SELECTOR_RUN_NAME,
    }
    answer = AIMessage(
        content=record.selector_answer or "",
        usage_metadata=usage_metadata(record.usage.selector),
        response_metadata={"model_name": model},
    )
    return manager, start, LLMResult(generations=[[ChatGeneration(message=answer)]])


def report_selector(
    run_manager: CallbackManagerForLLMRun | None, result: ChatResult, model: str
) -> None:
    """Reports the turn's selector calls as a child LLM run of the model's run."""
    if run_manager is None:
        return
    if (run := _selector_run(run_manager, CallbackManager, result, model)) is not None:
        manager, start, outcome = run
        for child in manager.on_llm_start(**start):
            child.on_llm_end(outcome)


async def areport_selector(
    run_manager: AsyncCallbackManagerForLLMRun | None, result: ChatResult, model: str
) -> None:
    """`report_selector` for an async call."""
    if run_manager is None:
        return
    if (run := _selector_run(run_manager, AsyncCallbackManager, result, model)) is not None:
        manager, start, outcome = run
        for child in await manager.on_llm_start(**start):
            await child.on_llm_end(outcome)
