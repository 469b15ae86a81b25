"""A selector instance calls through the graph's client, so the graph's `max_concurrency`
bounds its calls too; a client given to a selector is kept. Real graphs against the stub."""

from __future__ import annotations

import asyncio
import itertools
import json

from langchain_core.messages import HumanMessage

from tests.helpers import requests_in_flight, selector_requests, stub_kwargs
from tests.judges import pick, prompt_is, shown_actions
from turnbon_graph import ChatTurnBoN, create_turnbon_graph, turn_record
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.selectors import (
    EnsembleSelector,
    LLMSelector,
    RefineSelector,
    TournamentSelector,
)
from turnbon_graph.selectors.llm import SELECTOR_SYSTEM_PROMPT
from turnbon_graph.selectors.refine import REFINE_SYSTEM_PROMPT
from turnbon_graph.testing import (
    StubResponse,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
)

DELAY = 0.2
"""Every scripted request takes this long, so calls that are let run together overlap."""


def script_slow_models(stub: StubServer) -> None:
    """Each generator call answers a new text; the judge picks the first shown; the
    refiner keeps the action it is shown. Every answer takes DELAY."""
    counter = itertools.count()
    stub.route(
        lambda r: not is_selector_request(r),
        lambda _: StubResponse(body=chat_completion(f"answer {next(counter)}"), delay=DELAY),
    )
    stub.route(
        prompt_is(SELECTOR_SYSTEM_PROMPT),
        lambda _: StubResponse(body=chat_completion(pick(0)), delay=DELAY),
    )
    stub.route(
        prompt_is(REFINE_SYSTEM_PROMPT),
        lambda r: StubResponse(
            body=chat_completion(
                json.dumps(
                    {"reason": "fine", "content": shown_actions(r)[0]["content"], "tool_calls": []}
                )
            ),
            delay=DELAY,
        ),
    )


def most_in_flight(stub: StubServer) -> int:
    return requests_in_flight(stub, DELAY)


async def test_graph_max_concurrency_bounds_a_selector_instance(stub: StubServer) -> None:
    script_slow_models(stub)
    selector = LLMSelector("openai/stub", completion_kwargs=stub_kwargs(stub.base_url))
    graph = create_turnbon_graph(
        "openai/stub",
        n=2,
        selector=selector,
        max_concurrency=1,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    # Two episodes at once: one's selector call would overlap the other's generator calls.
    outs = await asyncio.gather(
        *(graph.ainvoke({"messages": [HumanMessage(f"task {i}")]}) for i in range(2))
    )
    for out in outs:
        record = turn_record(out["messages"][-1])
        assert record is not None and record.selector == "llm:openai/stub"
        assert record.fallback is None
    assert len(stub.requests) == 6 and len(selector_requests(stub.requests)) == 2
    assert most_in_flight(stub) == 1
    assert selector.client.max_concurrency == 1


async def test_a_client_given_to_the_selector_is_kept(stub: StubServer) -> None:
    stub.route(lambda r: not is_selector_request(r), chat_completion("a"), chat_completion("b"))
    # The selector's own client retries a 500; the graph's (max_retries=0) would not.
    stub.route(is_selector_request, error(500, "try again"), chat_completion(pick(1)))
    own = LiteLLMClient(max_retries=1, backoff_base=0.01)
    selector = LLMSelector(
        "openai/stub", completion_kwargs=stub_kwargs(stub.base_url), client=own, shuffle=False
    )
    graph = create_turnbon_graph(
        "openai/stub",
        n=2,
        selector=selector,
        max_concurrency=1,
        max_retries=0,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    assert selector.client is own
    out = await graph.ainvoke({"messages": [HumanMessage("go")]})
    record = turn_record(out["messages"][-1])
    assert record is not None and record.fallback is None and record.selected_index == 1
    assert len(selector_requests(stub.requests)) == 2
    assert selector.client is own


async def test_a_composite_selector_binds_its_parts(stub: StubServer) -> None:
    script_slow_models(stub)
    kwargs = stub_kwargs(stub.base_url)
    judges = [LLMSelector("openai/stub", completion_kwargs=kwargs) for _ in range(2)]
    selector = RefineSelector(
        "openai/stub", EnsembleSelector(judges, k=3), completion_kwargs=kwargs
    )
    graph = create_turnbon_graph(
        "openai/stub", n=2, selector=selector, max_concurrency=1, completion_kwargs=kwargs
    ).compile()
    out = await graph.ainvoke({"messages": [HumanMessage("go")]})
    record = turn_record(out["messages"][-1])
    assert record is not None and record.fallback is None
    assert record.selector == "refine:openai/stub(ensemble:3xopenai/stub)"
    # Two candidates, three ensemble calls (concurrent unless bound), one refinement.
    assert len(stub.requests) == 6 and most_in_flight(stub) == 1
    assert all(judge.client is selector.client for judge in judges)
    assert selector.client.max_concurrency == 1


def test_binding_leaves_every_client_given_by_the_user() -> None:
    own = LiteLLMClient()
    free, kept = LLMSelector("openai/a"), LLMSelector("openai/b", client=own)
    ensemble = EnsembleSelector([free, kept])
    tournament = TournamentSelector("openai/c")
    refine = RefineSelector("openai/d", "openai/e", client=own)  # inner made with `own`
    for selector in (ensemble, tournament, refine):
        create_turnbon_graph("openai/stub", selector=selector, max_concurrency=2)
    assert free.client.max_concurrency == 2 and kept.client is own
    assert tournament.judge.client.max_concurrency == 2
    assert refine.client is own and isinstance(refine.inner, LLMSelector)
    assert refine.inner.client is own
    # ChatTurnBoN builds its engine the same way.
    chat = ChatTurnBoN(model="openai/stub", selector=LLMSelector("openai/f"), max_concurrency=3)
    assert isinstance(chat.selector, LLMSelector)
    assert chat.selector.client is chat.engine.generator.client
    assert chat.selector.client.max_concurrency == 3
