"""Common random numbers (`turnbon_graph.bench.draws`) over LiteLLM's real HTTP path: each
generator call of an episode carries the seed of its place in the episode, the same in
every setting, and the terminal stub draws by it."""

from __future__ import annotations

import asyncio

from turnbon_graph import TurnEngine
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.bench.draws import (
    SeededClient,
    call_seed,
    draw_stream,
    request_key,
    seeded_engine,
    takes_seed,
)
from turnbon_graph.testing import StubServer


def ask(stub: StubServer, text: str, **extra: object) -> dict[str, object]:
    return {
        "model": "openai/stub",
        "messages": [{"role": "user", "content": text}],
        "api_base": stub.base_url,
        "api_key": "x",
        **extra,
    }


async def test_calls_are_seeded_by_what_they_ask_and_how_often(stub: StubServer) -> None:
    client = SeededClient(LiteLLMClient(), draw_stream(7, "task-a", 1))
    same = ask(stub, "the same")
    await asyncio.gather(*(client.complete(**same) for _ in range(3)))
    await asyncio.gather(*(client.complete(**ask(stub, f"call {i}")) for i in (2, 1, 0)))
    await client.complete(**ask(stub, "given", seed=99))
    stream = "7|task-a|1"
    sent = [(r.body["messages"][0]["content"], r.body.get("seed")) for r in stub.requests]
    key = request_key(same["messages"])  # type: ignore[arg-type]
    # Identical requests: one seed per occurrence, in any order.
    assert sorted(s for text, s in sent if text == "the same") == sorted(
        call_seed(stream, key, count) for count in range(3)
    )
    # Others: by what they ask alone, whatever order they started in.
    for i in range(3):
        messages = [{"role": "user", "content": f"call {i}"}]
        assert (f"call {i}", call_seed(stream, request_key(messages), 0)) in sent
    assert ("given", 99) in sent  # a call's own seed is kept
    assert len({s for _, s in sent}) == len(sent)
    assert call_seed(stream, key, 0) != call_seed("7|task-a|0", key, 0)  # another trial


def test_the_request_key_leaves_out_what_differs_between_runs() -> None:
    def turn(call_id: str, output: str) -> list[dict[str, object]]:
        call = {"id": call_id, "function": {"name": "shell", "arguments": '{"command": "ls"}'}}
        return [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": output},
        ]

    assert request_key(turn("call_a", "12:00 a")) == request_key(turn("call_b", "12:01 b"))
    other = turn("call_a", "x")
    other[1]["tool_calls"][0]["function"]["arguments"] = '{"command": "pwd"}'  # type: ignore[index]
    assert request_key(other) != request_key(turn("call_a", "x"))


async def test_a_seed_goes_only_where_litellm_sends_one() -> None:
    # Anthropic's API has no seed (LiteLLM would refuse the call): none is added there.
    assert not await takes_seed("anthropic/claude-3-5-haiku-20241022")
    assert await takes_seed("openai/stub") and await takes_seed("hosted_vllm/any")
    assert not await takes_seed("no-such-provider-model")  # unknown: nothing sent


def test_an_episodes_engine_seeds_only_its_generator() -> None:
    engine = TurnEngine.from_options("openai/stub", n=2, seed=5)
    seeded = seeded_engine(engine, "t", 0)
    client = seeded.generator.client  # type: ignore[attr-defined]
    assert isinstance(client, SeededClient) and client.stream == draw_stream(5, "t", 0)
    assert engine.generator.client is not client  # type: ignore[attr-defined]
    assert seeded.selector is engine.selector and seeded.config is engine.config
