"""A real `litellm.Router` behind a turn: model groups for the generator and the selector,
its own retries and cooldowns around a broken deployment, and the deployment of each
candidate in the record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from tests.helpers import selector_requests, stub_kwargs
from turnbon_graph import ModelSpec, create_turnbon_agent, create_turnbon_graph, turn_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    return f"ran {command}"


@pytest.fixture
def broken() -> Iterator[StubServer]:
    """A deployment that always answers 500."""
    with StubServer() as server:
        server.script(error(500, "this deployment is down"))
        yield server


def deployment(
    group: str, stub: StubServer, model: str, ident: str, **params: Any
) -> dict[str, Any]:
    return {
        "model_name": group,
        "litellm_params": {"model": model, **stub_kwargs(stub.base_url), **params},
        "model_info": {"id": ident},
    }


def router(stub: StubServer, broken: StubServer, broken_weight: int = 1) -> litellm.Router:
    """`broken_weight`: how much more often the Router's shuffle picks the broken "gen"
    deployment than the good one while neither is cooling down."""
    return litellm.Router(
        model_list=[
            deployment("gen", broken, "openai/gpt-4o-mini", "gen-broken", weight=broken_weight),
            deployment("gen", stub, "openai/gpt-4o-mini", "gen-ok", weight=1),
            deployment("sel", stub, "openai/gpt-4o", "sel-ok"),
        ],
        num_retries=2,
        retry_after=0,
        allowed_fails=0,
        cooldown_time=600,
    )


def agent_script(stub: StubServer) -> None:
    """Two turns of distinct shell calls per candidate, then an answer."""
    counter = iter(range(1000))

    def respond(request: CapturedRequest) -> dict[str, Any]:
        done = sum(m.get("role") == "tool" for m in (request.body or {}).get("messages", []))
        if done >= 2:
            return chat_completion("done")
        return chat_completion(tool_calls=[tool_call("shell", {"command": f"c{next(counter)}"})])

    stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 0})))
    stub.route(lambda r: not is_selector_request(r), respond)


async def test_a_router_group_serves_the_turns_around_a_broken_deployment(
    stub: StubServer, broken: StubServer
) -> None:
    agent_script(stub)
    # The Router picks a deployment at random: weighted so that it tries the broken one
    # first, and the calls one at a time, so that no two calls pick it before the first
    # failure has put it in cooldown. Without the cooldown it would be picked again and
    # again (and the turn fail); with it, exactly once.
    agent = create_turnbon_agent(
        "gen",
        [shell],
        router=router(stub, broken, broken_weight=1000),
        selector="sel",
        n=3,
        max_retries=0,
        max_concurrency=1,
    ).compile()
    result = await agent.ainvoke({"messages": [HumanMessage("go")]})
    records = [turn_record(m) for m in result["messages"] if isinstance(m, AIMessage)]
    assert result["messages"][-1].content == "done"
    assert len(records) == 3 and all(r is not None for r in records)
    for record in records:
        assert record is not None and record.n_ok == 3
        # Every candidate names the deployment that served it: the broken one never did.
        assert {c.deployment for c in record.candidates} == {"gen-ok"}
        assert all(c.error is None for c in record.candidates)
    # The Router tried the broken deployment, then kept away from it (cooldown); with
    # max_retries=0 ours would have failed that candidate: the Router's retry saved it.
    assert len(broken.requests) == 1
    assert len(selector_requests(stub.requests)) == 2
    sel = [r.body or {} for r in selector_requests(stub.requests)]
    assert {body["model"] for body in sel} == {"gpt-4o"}  # the sel group's deployment


async def test_routed_calls_are_priced_per_deployment(stub: StubServer, broken: StubServer) -> None:
    stub.script(chat_completion("a"), chat_completion("b"))
    stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 0})))
    graph = create_turnbon_graph("gen", router=router(stub, broken), selector="sel", n=2)
    state = await graph.compile().ainvoke({"messages": [HumanMessage("go")]})
    record = turn_record(state["messages"][-1])
    assert record is not None
    assert all((c.usage.cost_usd or 0) > 0 for c in record.candidates)
    assert (record.usage.selector.cost_usd or 0) > 0


async def test_a_pool_mixes_router_groups_and_plain_ids(
    stub: StubServer, broken: StubServer
) -> None:
    stub.script(chat_completion("a"), chat_completion("b"))
    stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 0})))
    pool = ["gen", ModelSpec(model="openai/plain", completion_kwargs=stub_kwargs(stub.base_url))]
    graph = create_turnbon_graph(pool, router=router(stub, broken), selector="sel", n=2)
    state = await graph.compile().ainvoke({"messages": [HumanMessage("go")]})
    record = turn_record(state["messages"][-1])
    assert record is not None and record.n_ok == 2
    assert [(c.model, c.deployment) for c in record.candidates] == [
        ("gen", "gen-ok"),
        ("openai/plain", None),
    ]


async def test_the_default_selector_of_a_spec_pool_uses_the_first_specs_endpoint(
    stub: StubServer,
) -> None:
    stub.route(lambda r: not is_selector_request(r), chat_completion("a"), chat_completion("b"))
    stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 1})))
    # The endpoint lives only in the spec: nothing in completion_kwargs.
    pool = [ModelSpec(model="openai/stub", n=2, completion_kwargs=stub_kwargs(stub.base_url))]
    state = await create_turnbon_graph(pool, n=2).compile().ainvoke({"messages": [("user", "x")]})
    record = turn_record(state["messages"][-1])
    assert record is not None
    assert record.selector == "llm:openai/stub" and record.fallback is None
    assert len(selector_requests(stub.requests)) == 1


def test_a_router_must_be_a_router() -> None:
    from turnbon_graph import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"router must be a litellm\.Router"):
        create_turnbon_graph("gen", router=["not", "a", "router"])
