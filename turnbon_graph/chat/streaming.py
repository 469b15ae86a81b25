"""`ChatTurnBoN`'s streaming: the chosen message of a turn replayed as `AIMessageChunk`s.

A turn is decided only once its candidates are in, so nothing streams while it runs:
neither the candidates' calls nor the selector's reach the caller. Then the chosen message
goes out as chunks that add up to it: its text a word at a time, each tool call as one
`tool_call_chunk`, and, on the last chunk only, its `response_metadata` (model name,
finish reason, the turn record) and `usage_metadata`, so that the sum carries each once.

`ReplayStreaming` is the chat model side: `stream`/`astream` run the turn through
`_generate`/`_agenerate` with the run's callbacks (progress events, the selector's usage
run), then yield the replay. langchain-core does not hand `_stream` the run manager that
`stream` opens, so `stream` fixes the run's id in advance and passes its config along
(`STREAM_CALL`), and `_stream` addresses the same handlers to that run.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import RunnableConfig, ensure_config

__all__ = ["STREAM_CALL", "ReplayStreaming", "replay_chunks"]

STREAM_CALL = "turnbon_stream_call"
"""The keyword under which `stream` hands `_stream` the run's config and id; not a
completion setting."""

# A word with the whitespace after it (or leading whitespace): the pieces join back
# into the text exactly.
_PIECE = re.compile(r"\S+\s*|\s+")


def _tool_call_chunks(message: AIMessage) -> list[ToolCallChunk]:
    """Every tool call of `message`, valid ones first, each under its own index; the
    invalid ones keep their raw arguments, so the sum reports them invalid again."""
    chunks = [
        tool_call_chunk(
            name=call["name"],
            args=json.dumps(call["args"], ensure_ascii=False),
            id=call.get("id"),
            index=index,
        )
        for index, call in enumerate(message.tool_calls)
    ]
    start = len(chunks)
    chunks += [
        tool_call_chunk(name=call.get("name"), args=call.get("args"), id=call.get("id"), index=i)
        for i, call in enumerate(message.invalid_tool_calls, start)
    ]
    return chunks


def replay_chunks(message: AIMessage) -> list[ChatGenerationChunk]:
    """`message` as chunks whose sum has its content, tool calls, additional kwargs,
    response metadata and usage; the last one has `chunk_position="last"`."""
    content = message.content
    empty: str | list[str | dict[str, Any]] = "" if isinstance(content, str) else []
    pieces: list[str | list[str | dict[str, Any]]]
    if isinstance(content, str):
        pieces = list(_PIECE.findall(content))
    else:
        pieces = [content] if content else []
    parts: list[dict[str, Any]] = [{"content": piece} for piece in pieces]
    parts += [{"content": empty, "tool_call_chunks": [call]} for call in _tool_call_chunks(message)]
    if not parts:
        parts = [{"content": empty}]
    parts[0]["additional_kwargs"] = dict(message.additional_kwargs)
    parts[-1] |= {
        "response_metadata": dict(message.response_metadata),
        "usage_metadata": message.usage_metadata,
        "chunk_position": "last",
    }
    return [ChatGenerationChunk(message=AIMessageChunk(id=message.id, **part)) for part in parts]


class ReplayStreaming(BaseChatModel):
    """Streaming for a chat model whose `_generate`/`_agenerate` decide the answer whole:
    `stream`/`astream` replay it as chunks; `invoke` never switches to `_stream`."""

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        """The chosen message as chunks, once the turn is decided (`chat.streaming`)."""
        config, call = _stream_call(config)
        yield from super().stream(input, config, stop=stop, **{STREAM_CALL: call}, **kwargs)

    async def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        """`stream` for async callers."""
        config, call = _stream_call(config)
        async for chunk in super().astream(
            input, config, stop=stop, **{STREAM_CALL: call}, **kwargs
        ):
            yield chunk

    def _should_stream(
        self,
        *,
        async_api: bool,
        run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> bool:
        # Only `stream`/`astream` replay chunks; `invoke` returns the turn whole even under
        # a streaming handler, through `_generate`, which has the run's callbacks.
        if STREAM_CALL not in kwargs:
            return False
        return super()._should_stream(async_api=async_api, run_manager=run_manager, **kwargs)

    def _get_invocation_params(
        self, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        kwargs.pop(STREAM_CALL, None)  # not a call setting: kept out of callbacks and cache keys
        return super()._get_invocation_params(stop=stop, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        call = kwargs.pop(STREAM_CALL, None)
        if run_manager is None and call is not None:
            run_manager = cast(CallbackManagerForLLMRun, self._open_run(call, CallbackManager))
        result = self._generate(messages, stop, run_manager, **kwargs)
        yield from replay_chunks(cast(AIMessage, result.generations[0].message))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call = kwargs.pop(STREAM_CALL, None)
        if run_manager is None and call is not None:
            manager = self._open_run(call, AsyncCallbackManager)
            run_manager = cast(AsyncCallbackManagerForLLMRun, manager)
        result = await self._agenerate(messages, stop, run_manager, **kwargs)
        for chunk in replay_chunks(cast(AIMessage, result.generations[0].message)):
            yield chunk

    def _open_run(
        self, call: _StreamCall, manager_class: type[CallbackManager | AsyncCallbackManager]
    ) -> CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun:
        """The callbacks of the run `stream` opened (langchain-core does not hand its run
        manager to `_stream`): the same handlers, addressed to the run id `stream` chose."""
        config, run_id = call
        manager = manager_class.configure(
            config.get("callbacks"),
            self.callbacks,
            self.verbose,
            config.get("tags"),
            self.tags,
            config.get("metadata"),
            self.metadata,
        )
        run_class = (
            AsyncCallbackManagerForLLMRun
            if manager_class is AsyncCallbackManager
            else CallbackManagerForLLMRun
        )
        return run_class(
            run_id=run_id,
            handlers=manager.handlers,
            inheritable_handlers=manager.inheritable_handlers,
            parent_run_id=manager.parent_run_id,
            tags=manager.tags,
            inheritable_tags=manager.inheritable_tags,
            metadata=manager.metadata,
            inheritable_metadata=manager.inheritable_metadata,
        )


_StreamCall = tuple[RunnableConfig, uuid.UUID]


def _stream_call(config: RunnableConfig | None) -> tuple[RunnableConfig, _StreamCall]:
    """`config` with a run id fixed in advance, so `_stream` can address the run that
    `stream` opens under it."""
    config = ensure_config(config)
    run_id = config.get("run_id") or uuid.uuid4()
    config = {**config, "run_id": run_id}
    return config, (config, run_id)
