"""BFCL multi-turn end to end: BFCL's ground truth replayed by a scripted model through
the runner (LiteLLM's HTTP path, the Turn-BoN agent loop, ToolNode, BFCL's backends) and
scored by BFCL's own checker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed: run `make setup-bfcl`")

from tests.helpers import stub_kwargs
from turnbon_bfcl import BFCLEnvironment, bfcl_api
from turnbon_bfcl.schema import call_string, parse_call
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import read_turns
from turnbon_graph.testing import StubServer

# Five entries that between them use all eight multi-turn backends, with steps of one and
# of several calls, positional ground-truth arguments and ids drawn by a seeded backend.
REPLAYED = [
    "multi_turn_base_0",  # GorillaFileSystem, TwitterAPI: 4 turns, order inside a step
    "multi_turn_base_43",  # GorillaFileSystem, MessageAPI: shares its first turn with _40
    "multi_turn_base_91",  # MessageAPI, VehicleControlAPI
    "multi_turn_base_144",  # TradingBot, MathAPI: a positional list argument
    "multi_turn_base_177",  # TicketAPI, TravelAPI: a booking id from a seeded generator
]
ALL_BACKENDS = {
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
}


@pytest.fixture(scope="module")
def env() -> BFCLEnvironment:
    return BFCLEnvironment(ids=REPLAYED)


def config(stub: StubServer, n: int = 1, trials: int = 1) -> BenchConfig:
    return BenchConfig(
        model="openai/stub",
        n_values=[n],
        trials=trials,
        concurrency=5,
        engine_options={"completion_kwargs": stub_kwargs(stub.base_url)},
    )


def recorded_calls(verifier_output: str) -> list[list[list[str]]]:
    first = verifier_output.splitlines()[0]
    assert first.startswith("calls per turn and step: ")
    calls: list[list[list[str]]] = json.loads(first.removeprefix("calls per turn and step: "))
    return calls


@pytest.fixture(scope="module")
def entries() -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in bfcl_api.load_entries("multi_turn_base")}


def normalised(env: BFCLEnvironment, entry: dict[str, Any], steps: int) -> list[list[list[str]]]:
    """The ground truth as the agent's calls are recorded: keyword arguments, in steps."""
    task = entry["id"]
    out = []
    for turn in env.ground_truth(task):
        calls = []
        for text in turn:
            name, args = parse_call(text, bfcl_api.parameter_names(entry, text.split("(")[0]))
            calls.append(call_string(name, args))
        out.append([calls[i : i + steps] for i in range(0, len(calls), steps)])
    return out


async def test_replayed_ground_truth_scores_full_marks(
    env: BFCLEnvironment, entries: dict[str, dict[str, Any]], stub: StubServer, tmp_path: Path
) -> None:
    assert set().union(*(t.metadata["involved_classes"] for t in env.tasks())) == ALL_BACKENDS
    stub.script(env.stub_policy(calls_per_step=2))
    results = await run_benchmark(env, config(stub, trials=2), tmp_path, progress=False)

    assert not stub.responder_errors
    assert {(r.task, r.trial): r.outcome for r in results} == {
        (task, trial): "pass" for task in REPLAYED for trial in (0, 1)
    }
    for result in results:
        assert result.verifier_output.endswith("checker: valid")
        assert recorded_calls(result.verifier_output) == normalised(env, entries[result.task], 2)
    # Trials run on fresh backends: the same replay sees the same observations.
    first, second = (list(read_turns(tmp_path, "N=1", "multi_turn_base_0", t)) for t in (0, 1))
    assert [line["observation"] for line in first] == [line["observation"] for line in second]
    assert first[0]["observation"][1]["content"] == "None"  # mkdir worked: temp was new


async def test_the_model_sees_bfcls_function_docs(
    entries: dict[str, dict[str, Any]], stub: StubServer, tmp_path: Path
) -> None:
    task = "multi_turn_base_144"  # TradingBot and MathAPI: float parameters, lists
    env = BFCLEnvironment(ids=[task])
    stub.script(env.stub_policy())
    (result,) = await run_benchmark(env, config(stub), tmp_path, progress=False)
    assert result.passed

    body: dict[str, Any] = stub.requests[0].body or {}
    sent = {t["function"]["name"]: t["function"] for t in body["tools"]}
    entry = entries[task]
    assert list(sent) == [doc["name"] for doc in entry["function"]]
    types = bfcl_api.type_map()
    floats = 0
    for doc in entry["function"]:
        function = sent[doc["name"]]
        assert function["description"] == doc["description"]
        parameters = function["parameters"]
        assert parameters["type"] == "object"
        assert parameters.get("required", []) == doc["parameters"].get("required", [])
        assert list(parameters["properties"]) == list(doc["parameters"]["properties"])
        for name, spec in doc["parameters"]["properties"].items():
            shown = parameters["properties"][name]
            assert shown["type"] == types.get(spec["type"], "string")
            if spec["type"] == "float":  # as BFCL sends floats to OpenAI models
                floats += 1
                assert shown["format"] == "float"
                assert shown["description"] == spec["description"] + " This is a float type value."
            else:
                assert shown["description"] == spec["description"]
    assert floats > 0


async def test_a_corrupted_replay_scores_lower(
    env: BFCLEnvironment, stub: StubServer, tmp_path: Path
) -> None:
    corrupted = {task: env.ground_truth(task) for task in REPLAYED}
    corrupted["multi_turn_base_43"][3].pop()  # the message is never sent
    booking = corrupted["multi_turn_base_177"][0]
    booking[0] = booking[0].replace("travel_class='business'", "travel_class='economy'")
    stub.script(env.stub_policy(ground_truth=corrupted))

    results = await run_benchmark(env, config(stub, n=3), tmp_path, progress=False)

    assert not stub.responder_errors
    outcomes = {r.task: r.outcome for r in results}
    assert outcomes == {
        "multi_turn_base_0": "pass",
        "multi_turn_base_43": "wrong_submission",
        "multi_turn_base_91": "pass",
        "multi_turn_base_144": "pass",
        "multi_turn_base_177": "wrong_submission",
    }
    failed = {r.task: r.verifier_output.splitlines()[-1] for r in results if not r.passed}
    assert all(line.startswith("checker: multi_turn:") for line in failed.values())
    assert "MessageAPI" in failed["multi_turn_base_43"]
    assert "TravelAPI" in failed["multi_turn_base_177"]
