"""`run_benchmark` end to end on terminal tasks, with the scripted stand-in model on the
loopback stub server: real sandboxes, real verifiers, LiteLLM's real HTTP path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import read_turns
from turnbon_graph.testing import StubServer
from turnbon_terminal import TerminalEnvironment, stub_policy

TASKS = ["active-emails", "greet-script", "sales-total", "word-frequency"]
SECRETS = {
    "OPENAI_API_KEY": "sk-test-bench-openai-8c2d",
    "ANTHROPIC_API_KEY": "sk-ant-test-bench-1f9e",
    "GEMINI_API_KEY": "gemini-test-bench-44aa",
}


def commands(record: dict[str, Any]) -> list[str | None]:
    """The shell command of each candidate (None for a text answer)."""
    found: list[str | None] = []
    for candidate in record["candidates"]:
        calls = candidate["tool_calls"]
        found.append(calls[0]["args"]["command"] if calls else None)
    return found


async def test_a_benchmark_run_on_the_stub_policy(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    env = TerminalEnvironment()
    solutions = {t: (env.task(t).solution_script or Path("/dev/null")).read_text() for t in TASKS}
    stub.script(stub_policy(env))
    config = BenchConfig(
        model="openai/stub",
        n_values=[1, 4],
        trials=2,
        engine_options={"completion_kwargs": {"api_base": stub.base_url, "api_key": "x"}},
    )
    run = tmp_path / "run"
    results = await run_benchmark(env, config, run, tasks=TASKS, progress=False)

    assert len(results) == 2 * len(TASKS) * 2
    assert not stub.responder_errors
    for result in results:
        assert result.outcome in ("pass", "wrong_submission"), result.error
        lines = read_turns(run, result.setting, result.task, result.trial)
        records = [cast(dict[str, Any], line["record"]) for line in lines]
        assert records, "every episode takes at least one turn"
        solution = solutions[result.task]
        chosen = [commands(r)[r["selected_index"]] for r in records]
        # The policy: an episode passes exactly when its solution ran, and then it stops.
        assert result.passed == (solution in chosen), (result, chosen)
        if result.passed:
            assert chosen[-2] == solution and chosen[-1] is None
        for record in records:
            proposed = commands(record)
            assert len(proposed) == result.n
            if solution in proposed:  # the selector prefers the solution
                assert proposed[record["selected_index"]] == solution
    settings = json.loads((run / "run.json").read_text())
    assert settings["environment"] == "terminal" and settings["tasks"] == TASKS

    # No provider key of this process reached the run folder (observations included).
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) > len(results)
    for path in files:
        data = path.read_bytes()
        for value in SECRETS.values():
            assert value.encode() not in data, f"{path} holds a secret"
