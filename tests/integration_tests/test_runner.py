"""The benchmark runner: episodes, outcomes, the run folder, resuming after a kill."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import ToolException
from litellm.exceptions import BadRequestError, ContextWindowExceededError

from tests.counter_env import CounterEnvironment
from tests.helpers import episode_lines, stub_kwargs
from turnbon_graph._litellm.failures import CallFailedError
from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.bench.episode import classify_failure
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import EPISODES_FILE, read_episodes, read_turns
from turnbon_graph.errors import AllCandidatesFailedError, ConfigurationError
from turnbon_graph.selectors.base import Selection
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)
from turnbon_graph.turn.candidates import Candidate

ROOT = Path(__file__).resolve().parents[2]


def counting_model(request: CapturedRequest) -> dict[str, Any]:
    """Increments by the task's target in one step, then says done; the selector picks 0."""
    if is_selector_request(request):
        return chat_completion(json.dumps({"reason": "r", "selected_index": 0}))
    messages = (request.body or {})["messages"]
    target = int(re.search(r"to (\d+)", messages[0]["content"]).group(1))  # type: ignore[union-attr]
    if any(m["role"] == "tool" for m in messages):
        return chat_completion("done")
    by = target if target != 13 else 12  # task "unlucky" ends one short: a wrong submission
    return chat_completion(tool_calls=[tool_call("increment", {"by": by})])


def config(stub: StubServer, **overrides: Any) -> BenchConfig:
    options: dict[str, Any] = {"completion_kwargs": stub_kwargs(stub.base_url)}
    return BenchConfig(
        model="openai/stub",
        n_values=overrides.pop("n_values", [1, 3]),
        trials=overrides.pop("trials", 2),
        engine_options=options,
        **overrides,
    )


async def test_runs_every_episode_and_records_outcomes(stub: StubServer, tmp_path: Path) -> None:
    stub.script(counting_model)
    env = CounterEnvironment({"five": 5, "unlucky": 13})
    results = await run_benchmark(env, config(stub), tmp_path, progress=False)
    assert len(results) == 2 * 2 * 2  # settings x tasks x trials
    outcomes = {(r.setting, r.task): r.outcome for r in results}
    assert outcomes[("N=1", "five")] == "pass" and outcomes[("N=3", "five")] == "pass"
    assert outcomes[("N=1", "unlucky")] == "wrong_submission"
    assert all(e.closed for e in env.episodes)
    five = next(r for r in results if r.task == "five" and r.setting == "N=3")
    assert five.turns == 2 and five.usage.generator.calls == 6
    lines = list(read_turns(tmp_path, "N=3", "five", five.trial))
    assert [line["observation"] for line in lines] == [
        [{"tool": "increment", "content": "counter is 5"}],
        None,
    ]
    assert lines[0]["record"]["n_requested"] == 3  # type: ignore[index]
    settings = json.loads((tmp_path / "run.json").read_text())
    assert settings["n_values"] == [1, 3] and settings["tasks"] == ["five", "unlucky"]
    # The local runner ran every episode in this process, with no Ray node.
    assert {(r.worker.pid, r.worker.node) for r in results if r.worker} == {(os.getpid(), None)}
    assert all(r.worker is not None for r in results)


async def test_failures_become_agent_errors_and_time_limits(
    stub: StubServer, tmp_path: Path
) -> None:
    stub.script(error(400, "model is gone"))
    results = await run_benchmark(
        CounterEnvironment({"five": 5}),
        config(stub, n_values=[2], trials=1),
        tmp_path,
        progress=False,
    )
    (result,) = results
    assert result.outcome == "agent_error" and "model is gone" in (result.error or "")

    slow = tmp_path / "slow"
    stub.reset()
    stub.script(lambda r: StubResponse(body=counting_model(r), delay=2.0))
    env = CounterEnvironment({"five": 5})
    task = env.tasks()[0]
    env.tasks = lambda: [task.model_copy(update={"agent_timeout_s": 0.3})]  # type: ignore[method-assign]
    (timed_out,) = await run_benchmark(
        env, config(stub, n_values=[1], trials=1), slow, progress=False
    )
    assert timed_out.outcome == "time_limit"


class BrokenSelector:
    """A selector with a bug: a library error, not the agent's."""

    name = "broken"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        raise KeyError("a bug in the selector")


def diverse_model() -> Any:
    """Each generator call proposes another increment, so a turn's candidates differ."""
    calls = iter(range(1, 1000))

    def answer(request: CapturedRequest) -> dict[str, Any]:
        return chat_completion(tool_calls=[tool_call("increment", {"by": next(calls)})])

    return answer


async def test_a_library_bug_propagates_instead_of_counting_as_an_agent_error(
    stub: StubServer, tmp_path: Path
) -> None:
    stub.script(diverse_model())
    env = CounterEnvironment({"five": 5})
    broken = config(stub, n_values=[3], trials=1, selector=BrokenSelector())
    with pytest.raises(KeyError, match="a bug in the selector"):
        await run_benchmark(env, broken, tmp_path, progress=False)
    assert all(e.closed for e in env.episodes)
    assert read_episodes(tmp_path) == []  # no episode recorded as if the agent had failed


TASK = TaskSpec(id="t", instruction="x", agent_timeout_s=7)


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (
            AllCandidatesFailedError("m", 2, "ContextWindowExceededError: too long"),
            "out_of_context",
        ),
        (AllCandidatesFailedError("m", 2, "RateLimitError"), "agent_error"),
        (ConfigurationError("the episode has no tools"), "agent_error"),
        (ToolException("the tool failed"), "agent_error"),
        (CallFailedError("AuthenticationError: key [redacted]"), "agent_error"),
        (BadRequestError("bad", model="m", llm_provider="openai"), "agent_error"),
        (ContextWindowExceededError("long", model="m", llm_provider="openai"), "out_of_context"),
        (TimeoutError(), "time_limit"),
    ],
)
def test_the_agents_failures_are_outcomes(exc: Exception, outcome: str) -> None:
    assert classify_failure(exc, TASK)[0] == outcome


@pytest.mark.parametrize("exc", [KeyError("k"), TypeError("t"), AttributeError("a"), OSError()])
def test_other_exceptions_are_bugs_and_propagate(exc: Exception) -> None:
    with pytest.raises(type(exc)):
        classify_failure(exc, TASK)


async def test_follow_up_user_turns_are_sent_in_order(stub: StubServer, tmp_path: Path) -> None:
    stub.script(counting_model)
    env = CounterEnvironment({"five": 5}, follow_ups=["Now confirm."])
    (result,) = await run_benchmark(
        env, config(stub, n_values=[1], trials=1), tmp_path, progress=False
    )
    users = [
        [m["content"] for m in (r.body or {})["messages"] if m["role"] == "user"]
        for r in stub.requests
    ]
    assert users[-1] == ["Bring the counter to 5.", "Now confirm."]
    assert result.outcome == "pass"


async def test_a_rerun_with_other_settings_is_refused(stub: StubServer, tmp_path: Path) -> None:
    stub.script(counting_model)
    env = CounterEnvironment({"five": 5})
    await run_benchmark(env, config(stub, n_values=[1], trials=1), tmp_path, progress=False)
    with pytest.raises(ConfigurationError, match="trials"):
        await run_benchmark(env, config(stub, n_values=[1], trials=3), tmp_path, progress=False)


async def test_redo_errors_runs_the_agent_errors_again_and_their_new_results_count(
    stub: StubServer, tmp_path: Path
) -> None:
    env = CounterEnvironment({"five": 5, "seven": 7, "unlucky": 13})
    # A wrong key: every call is refused (401, not retried), every episode an agent error.
    stub.script(lambda r: error(401, "Incorrect API key provided"))
    first = await run_benchmark(env, config(stub, n_values=[1]), tmp_path, progress=False)
    assert [r.outcome for r in first] == ["agent_error"] * 6
    stub.reset()
    stub.script(counting_model)  # the key fixed
    again = await run_benchmark(env, config(stub, n_values=[1]), tmp_path, progress=False)
    assert again == first and not stub.requests  # a plain rerun resumes past them
    redone = await run_benchmark(
        env, config(stub, n_values=[1], redo_errors=True), tmp_path, progress=False
    )
    assert sorted(r.key for r in redone) == sorted(r.key for r in first)  # each once
    outcomes = {(r.task, r.trial): r.outcome for r in redone}
    assert outcomes == {
        **{(task, trial): "pass" for task in ("five", "seven") for trial in (0, 1)},
        **{("unlucky", trial): "wrong_submission" for trial in (0, 1)},
    }
    assert len((tmp_path / EPISODES_FILE).read_text().splitlines()) == 12  # nothing erased
    turns = list(read_turns(tmp_path, "N=1", "five", 0))
    assert len(turns) == 2 and turns[0]["observation"]  # the new attempt's turns
    # Nothing left to redo: a further redo runs nothing.
    stub.reset()
    stub.script(counting_model)
    assert (
        await run_benchmark(
            env, config(stub, n_values=[1], redo_errors=True), tmp_path, progress=False
        )
        == redone
    )
    assert not stub.requests


KILLABLE = """
import asyncio, pathlib, sys
sys.path.insert(0, {root!r})
from tests.counter_env import CounterEnvironment
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
env = CounterEnvironment({{f"t{{i}}": 5 for i in range(6)}})
options = {{"completion_kwargs": {{"api_base": {base!r}, "api_key": "k"}}}}
config = BenchConfig("openai/stub", [1], trials=1, concurrency=1, engine_options=options)
asyncio.run(run_benchmark(env, config, pathlib.Path({run!r}), progress=False))
"""


async def test_killing_a_run_and_rerunning_finishes_it(stub: StubServer, tmp_path: Path) -> None:
    stub.script(lambda r: StubResponse(body=counting_model(r), delay=0.15))
    run = tmp_path / "run"
    code = KILLABLE.format(root=str(ROOT), base=stub.base_url, run=str(run))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", code, env=env)
    try:
        for _ in range(1200):  # until two episodes are written (generous; not a bound)
            episodes = run / EPISODES_FILE
            if episodes.exists() and len(episodes.read_text().splitlines()) >= 2:
                break
            await asyncio.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        await child.wait()
    finished = {r.task for r in read_episodes(run)}
    assert 2 <= len(finished) < 6
    stub.reset()
    stub.script(counting_model)
    results = await run_benchmark(
        CounterEnvironment({f"t{i}": 5 for i in range(6)}),
        BenchConfig(
            model="openai/stub",
            n_values=[1],
            trials=1,
            concurrency=1,
            engine_options={"completion_kwargs": stub_kwargs(stub.base_url)},
        ),
        run,
        progress=False,
    )
    assert sorted(r.task for r in results) == [f"t{i}" for i in range(6)]  # none lost
    assert sorted(r.task for r in episode_lines(run)) == [f"t{i}" for i in range(6)]  # none twice
    # Only the unfinished episodes ran again: two calls each (act, then answer).
    assert len(stub.requests) == 2 * (6 - len(finished))
