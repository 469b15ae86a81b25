"""The BFCL environment's parts on BFCL's real data and backends: tasks, the spec of the
entry point, fresh backends per episode, BFCL's instance cache, the step limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed: run `make setup-bfcl`")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from turnbon_bfcl import BFCLEnvironment, bfcl_api, environment
from turnbon_bfcl.errors import ReplayError
from turnbon_bfcl.schema import parse_call
from turnbon_graph.bench.environment import Environment, Episode
from turnbon_graph.errors import ConfigurationError, TurnBoNError
from turnbon_graph.testing import CapturedRequest

FILES = "multi_turn_base_0"  # GorillaFileSystem and TwitterAPI


@pytest.fixture(scope="module")
def env() -> BFCLEnvironment:
    return BFCLEnvironment(ids=[FILES, "multi_turn_base_43"])


def test_entries_become_tasks_with_their_user_turns_in_order(env: BFCLEnvironment) -> None:
    assert isinstance(env, Environment) and env.name == "bfcl"
    entries = {e["id"]: e for e in bfcl_api.load_entries("multi_turn_base")}
    for task in env.tasks():
        turns = [messages[0]["content"] for messages in entries[task.id]["question"]]
        assert [task.instruction, *task.follow_ups] == turns
        assert task.category == "multi_turn_base"
        assert task.max_turns == bfcl_api.max_steps_per_turn() + 1
    assert len(env.tasks()[0].follow_ups) == 3


def test_the_entry_point_spec_is_a_count_or_ids() -> None:
    assert len(environment(None).tasks()) == 200
    assert [t.id for t in environment("3").tasks()] == [f"multi_turn_base_{i}" for i in range(3)]
    chosen = environment(" multi_turn_base_17,multi_turn_base_5 ")
    assert [t.id for t in chosen.tasks()] == ["multi_turn_base_5", "multi_turn_base_17"]
    with pytest.raises(ConfigurationError, match="unknown BFCL id"):
        environment("multi_turn_base_5,multi_turn_base_999")
    with pytest.raises(ConfigurationError, match="use multi_turn_base"):
        BFCLEnvironment(category="multi_turn_miss_func")
    with pytest.raises(ConfigurationError, match="limit"):
        environment("0")


async def test_two_episodes_of_one_task_share_no_backend_state(env: BFCLEnvironment) -> None:
    task = env.tasks()[0]
    first, second = await env.start(task, 0), await env.start(task, 0)
    assert isinstance(first, Episode)
    try:
        assert first.namespace != second.namespace
        assert first.backends["GorillaFileSystem"] is not second.backends["GorillaFileSystem"]
        made = first.execute_step([("cd", {"folder": "document"}), ("mkdir", {"dir_name": "x"})], 0)
        assert made == ['{"current_working_directory": "document"}', "None"]
        seen = second.execute_step([("cd", {"folder": "document"}), ("ls", {})], 0)
        assert "x" not in json.loads(seen[1])["current_directory_content"]
        again = first.execute_step([("ls", {})], 0)
        assert "x" in json.loads(again[0])["current_directory_content"]
    finally:
        await first.close()
        await second.close()
    # Nothing of either episode is left in BFCL's instance cache.
    assert bfcl_api.cached_instances(first.namespace) == []
    assert bfcl_api.cached_instances(second.namespace) == []


def test_bfcls_cache_shares_instances_under_one_name_and_purge_clears_it(
    env: BFCLEnvironment,
) -> None:
    """Why every episode and check gets its own namespace: BFCL's cache keys instances
    by model name and test id only."""
    entry = next(e for e in bfcl_api.load_entries("multi_turn_base") if e["id"] == FILES)
    name = bfcl_api.new_namespace()
    bfcl_api.execute(["cd(folder='document')", "mkdir(dir_name='x')"], entry, name)
    (listing,) = bfcl_api.execute(["ls()"], entry, name)[0]
    assert "x" in json.loads(listing)["current_directory_content"]  # the same instance
    assert bfcl_api.purge(name) == 2  # one per involved class
    (fresh,) = bfcl_api.execute(["ls()"], entry, name)[0]
    assert json.loads(fresh)["current_directory_content"] == ["document", "archive"]
    bfcl_api.purge(name)


async def test_verifying_twice_gives_the_same_verdict(env: BFCLEnvironment) -> None:
    episode = await env.start(env.tasks()[0], 0)
    try:
        for turn, calls in enumerate(env.ground_truth(FILES)):
            episode.execute_step([_call(episode.entry, text) for text in calls], turn)
        first, second = await episode.verify(), await episode.verify()
    finally:
        await episode.close()
    assert first.passed and first == second  # the checker's own instances were fresh


async def test_more_steps_in_a_turn_than_bfcl_allows_fail_the_entry(env: BFCLEnvironment) -> None:
    episode = await env.start(env.tasks()[0], 0)
    try:
        for _ in range(bfcl_api.max_steps_per_turn() + 1):
            episode.execute_step([("pwd", {})], 0)
        verdict = await episode.verify()
    finally:
        await episode.close()
    assert not verdict.passed and verdict.error is None
    assert "multi_turn:force_terminated" in verdict.output


async def test_tool_calls_of_one_message_run_in_order_as_one_step(env: BFCLEnvironment) -> None:
    episode = await env.start(env.tasks()[0], 0)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(list(episode.tools)))
    graph.add_edge(START, "tools")
    calls = [
        {"name": "cd", "args": {"folder": "document"}, "id": "a"},
        {"name": "mkdir", "args": {"dir_name": "temp"}, "id": "b"},
        {"name": "mv", "args": {"source": "final_report.pdf", "destination": "temp"}, "id": "c"},
    ]
    messages = [
        HumanMessage("first"),
        AIMessage("", tool_calls=[]),
        HumanMessage("second"),
        AIMessage("", tool_calls=calls),
    ]
    try:
        out = await graph.compile().ainvoke({"messages": messages})
    finally:
        await episode.close()
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["a", "b", "c"]
    assert "Error" not in str(results[2].content)  # mv found temp: mkdir ran before it
    assert episode.calls == [
        [],
        [
            [
                "cd(folder='document')",
                "mkdir(dir_name='temp')",
                "mv(source='final_report.pdf',destination='temp')",
            ]
        ],
        [],
        [],
    ]


async def test_made_up_names_are_answered_with_errors_and_not_executed(
    env: BFCLEnvironment,
) -> None:
    episode = await env.start(env.tasks()[0], 0)
    try:
        results = episode.execute_step(
            [("rm_rf", {}), ("ls", {"a": True, "__import__('os')": 1}), ("pwd", {})], 0
        )
    finally:
        await episode.close()
    assert results[0].startswith("Error during execution: no function named")
    assert results[1].startswith("Error during execution: invalid argument name")
    assert results[2] == '{"current_working_directory": "/workspace"}'
    assert episode.calls[0] == [["pwd()"]]


def test_the_replay_refuses_conversations_it_has_no_script_for(env: BFCLEnvironment) -> None:
    replay = env.stub_policy()
    request = CapturedRequest(
        path="/v1/chat/completions",
        headers={},
        body={"messages": [{"role": "user", "content": "something else"}]},
        received_at=0.0,
    )
    with pytest.raises(ReplayError, match="no entry") as caught:
        replay(request)
    assert isinstance(caught.value, TurnBoNError)
    with pytest.raises(ConfigurationError, match="calls_per_step"):
        env.stub_policy(calls_per_step=0)


def _call(entry: dict[str, Any], text: str) -> tuple[str, dict[str, Any]]:
    name = text.split("(", 1)[0]
    return parse_call(text, bfcl_api.parameter_names(entry, name))
