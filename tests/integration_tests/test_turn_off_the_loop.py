"""The work a turn does in its own process, before and after its calls, that grows with
the conversation or loads files runs on a thread, never on the event loop: converting a
long conversation to OpenAI messages (most of a second at 90,000 messages), rendering a
long transcript into the selector's question, and counting each choice's tokens of a
call with `n` (LiteLLM loads the model's tokenizer on its first count). Each is watched
by a wrapper that records the thread it ran on and calls the real function."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tests.helpers import stub_engine
from tests.judges import shown_commands
from turnbon_graph import turn_record
from turnbon_graph._sync import LONG_CONVERSATION
from turnbon_graph.selectors import FirstSelector, llm
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    is_selector_request,
    tool_call,
)
from turnbon_graph.turn import generator


def watched(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    threads: list[threading.Thread],
    module: Any = generator,
) -> None:
    """`module.<name>`, recording in `threads` the thread of each call."""
    real: Callable[..., Any] = getattr(module, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)


def conversation(messages: int) -> list[BaseMessage]:
    said: list[BaseMessage] = []
    for i in range(messages // 2):
        said += [HumanMessage(f"question {i}"), AIMessage(f"answer {i}")]
    return [*said, HumanMessage("and now?")][-messages:]


@pytest.mark.parametrize("length", [3, LONG_CONVERSATION + 1])
async def test_a_long_conversation_is_converted_on_a_thread(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    stub.script(chat_completion("done"))
    threads: list[threading.Thread] = []
    watched(monkeypatch, "to_openai_messages", threads)
    engine = stub_engine(stub, n=1, selector=FirstSelector())
    message = await engine.run(conversation(length))
    assert message.content == "done"
    (thread,) = threads
    # a short one stays on the loop (a thread's hop would cost more than the work)
    assert (thread is threading.main_thread()) == (length <= LONG_CONVERSATION)
    assert len(stub.requests[0].body["messages"]) == length


async def test_the_choices_of_one_call_are_counted_on_a_thread(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.script(chat_completion(choices=[choice(f"answer {i}", index=i) for i in range(3)]))
    threads: list[threading.Thread] = []
    watched(monkeypatch, "choice_tokens", threads)
    engine = stub_engine(stub, n=3, native_n=True, selector=FirstSelector())
    record = turn_record(await engine.run([HumanMessage("go")]))
    assert record is not None and record.sampling.native_n is True
    assert len(threads) == 3
    assert all(thread is not threading.main_thread() for thread in threads)


@pytest.mark.parametrize("length", [3, LONG_CONVERSATION + 1])
async def test_a_long_transcript_is_rendered_for_the_selector_on_a_thread(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    commands = ["ls", "pwd"]
    calls = [tool_call("bash", {"command": c}) for c in commands]

    def pick_pwd(request: CapturedRequest) -> dict[str, Any]:
        chosen = shown_commands(request).index("pwd")
        return chat_completion(json.dumps({"reason": "r", "selected_index": chosen}))

    stub.route(is_selector_request, pick_pwd)
    stub.script(chat_completion(choices=[choice(None, [c], index=i) for i, c in enumerate(calls)]))
    threads: list[threading.Thread] = []
    watched(monkeypatch, "build_request", threads, llm)
    engine = stub_engine(stub, n=2, native_n=True)  # the LLM selector on the same stub
    record = turn_record(await engine.run(conversation(length)))
    assert record is not None and record.selector == "llm:openai/stub"
    assert record.candidates[record.selected_index].tool_calls[0]["args"] == {"command": "pwd"}
    (thread,) = threads
    assert (thread is threading.main_thread()) == (length <= LONG_CONVERSATION)
