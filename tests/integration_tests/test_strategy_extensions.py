"""The extension points of the comparison, end to end: a strategy of one class and a value
function registered in this module run through `run_benchmark`; a process reward model
served behind a LiteLLM id, the task's own tests as an oracle value, and a rubric of
one's own through `turnbon bench`; fusion and refine as settings of the comparison. Real
terminal sandboxes and verifiers, LiteLLM's real HTTP path to loopback stubs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from tests.integration_tests.test_strategies import TASKS, bench, check_tree, tree
from tests.integration_tests.test_strategies_search import give_up_or_look
from turnbon_graph.bench.environment import Episode
from turnbon_graph.bench.report.writer import write_report
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import read_episodes, read_turns
from turnbon_graph.bench.strategies.registry import (
    StrategyKind,
    register_strategy,
    register_value,
)
from turnbon_graph.bench.strategies.search import Search, Strategy
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.trajectory import Trajectory
from turnbon_graph.bench.values.value import VALUE_RUBRIC, is_value_request
from turnbon_graph.cli.main import main
from turnbon_graph.testing import StubServer
from turnbon_terminal import TerminalEnvironment, TerminalEpisode, stub_policy
from turnbon_terminal.stub_policy import GIVE_UP
from turnbon_terminal.task.folders import read_task_text


class Greedy(Strategy):
    """One trajectory: its N candidates each run in a fork and are scored, and the best
    goes on (lookahead without rollouts)."""

    kind = StrategyKind(name="greedy", summary="the best-valued of N children goes on", value=True)

    async def settle(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        best = max(children, key=lambda c: c.score, default=None)
        for child in children:
            if child is not best:
                await search.prune(child)
        if best is not None and best.ended is not None:
            await search.hold(best, best.ended)
            return []
        return [best] if best is not None else []


register_strategy(Greedy)


class Steps:
    """A value function of this module: 2 points a command that exited 0, at most 10;
    it checks that the environment it is handed is the trajectory's own."""

    name = "steps"

    def __init__(self, seen: list[tuple[float, str]]) -> None:
        self.seen = seen

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        return 0

    async def score(self, messages: Sequence[BaseMessage], episode: Episode) -> float:
        assert isinstance(episode, TerminalEpisode) and episode.workdir.is_dir()
        done = sum(
            1
            for m in messages
            if isinstance(m, ToolMessage) and str(m.content).endswith("[exit code 0]")
        )
        value = min(2.0 * done, 10.0)
        last = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        self.seen.append((value, str(last.content) or json.dumps(last.tool_calls[0]["args"])))
        return value


SEEN: list[tuple[float, str]] = []
register_value("steps", lambda setup: Steps(SEEN))


def config(stub: StubServer, *specs: StrategySpec, n: int = 3) -> BenchConfig:
    return BenchConfig(
        model="openai/stub",
        n_values=[n],
        concurrency=1,
        engine_options={"completion_kwargs": {"api_base": stub.base_url, "api_key": "x"}},
        strategies=list(specs),
    )


async def test_a_strategy_of_one_class_runs_beside_bon(stub: StubServer, tmp_path: Path) -> None:
    """Registered in this module: one run compares it with bon, labelled by its kind in
    the run folder and in the report."""
    env = TerminalEnvironment()
    stub.script(stub_policy(env))
    run = tmp_path / "run"
    specs = (StrategySpec(), StrategySpec(name="greedy"))
    rows = await run_benchmark(env, config(stub, *specs), run, tasks=TASKS, progress=False)
    assert not stub.responder_errors
    assert sorted((r.setting, r.task) for r in rows) == sorted(
        (s, t) for s in ("N=3", "greedy N=3") for t in TASKS
    )
    settings = json.loads((run / "run.json").read_text())
    assert [s["name"] for s in settings["strategies"]] == ["bon", "greedy"]
    for row in rows:
        if row.setting == "greedy N=3":
            assert row.strategy == StrategySpec(name="greedy")
            assert row.outcome == "pass", row.error  # the value model leads it to the solution
            check_tree(tree(run, row))
            assert row.search is not None and row.search.value_calls > 0
    report = write_report(run, resamples=100).read_text()
    assert "| greedy N=3 | greedy |" in report


async def test_a_value_function_registered_by_name_scores_the_search(
    stub: StubServer, tmp_path: Path
) -> None:
    """`value="steps"` names the function registered in this module: it scores every
    child, with the trajectory's own environment in hand; the setting's label names it."""
    env = TerminalEnvironment()
    stub.script(give_up_or_look(env))  # a give-up and a listing first: two children
    SEEN.clear()
    spec = StrategySpec(name="beam", width=2, value="steps")
    run = tmp_path / "run"
    [row] = await run_benchmark(
        env, config(stub, spec, n=2), run, tasks=["greet-script"], progress=False
    )
    assert row.setting == "beam W=2 N=2 value=steps" and row.strategy == spec
    assert (0.0, GIVE_UP) in SEEN and (2.0, json.dumps({"command": "ls"})) in SEEN
    nodes = tree(run, row)
    scored = sorted(n["value"] for n in nodes if n["value"] is not None)
    assert scored == sorted(value for value, _ in SEEN)
    assert not any(is_value_request((r.body or {}).get("messages") or []) for r in stub.requests)
    assert row.value_usage is not None and row.value_usage.total_tokens == 0
    assert row.search is not None and row.search.value_calls == len(SEEN)


def solution(env: TerminalEnvironment, task: str) -> str:
    [found] = [t for t in env.terminal_tasks() if t.id == task]
    assert found.solution_script is not None
    return read_task_text(found.solution_script)


def test_a_process_reward_model_served_at_a_litellm_id(
    stub: StubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--value prm:openai/my-prm --value-api-base URL`: the reward model at URL gets the
    task as the user's message and the steps as the assistant's, no system prompt, and
    its number (0 to 1) is the value (0 to 10)."""
    env = TerminalEnvironment()
    solved = solution(env, "greet-script")

    def reward(request: Any) -> dict[str, Any]:
        from turnbon_graph.testing import chat_completion

        steps = request.body["messages"][-1]["content"]
        return chat_completion(f"reward: {0.9 if json.dumps(solved)[1:-1] in steps else 0.2}")

    stub.script(reward)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    run = tmp_path / "run"
    flags = ["--strategy", "beam", "-n", "3", "--value", "prm:openai/my-prm"]
    flags += ["--value-api-base", stub.base_url]
    assert bench(run, *flags, tasks=["greet-script"]) == 0, capsys.readouterr().err
    assert not stub.responder_errors and stub.requests
    for request in stub.requests:
        body = request.body or {}
        assert body["model"] == "my-prm"
        roles = [m["role"] for m in body["messages"]]
        assert roles[:2] == ["user", "assistant"] and "system" not in roles
        assert body["messages"][0]["content"].startswith("Create an executable script")
    [row] = read_episodes(run)
    assert row.setting == "beam W=2 N=3 value=prm:openai/my-prm"
    values = {n["value"] for n in tree(run, row) if n["value"] is not None}
    assert values <= {2.0, 9.0} and 9.0 in values
    assert row.outcome == "pass" and row.search is not None and row.search.value_failed == 0


def test_the_tests_as_an_oracle_value_are_labelled_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--value oracle`: each child is scored 10 or 0 by the task's tests on a fork of
    its environment; the command warns that it leaks the verifier, and the run folder
    and the report label the setting value=oracle."""
    run = tmp_path / "run"
    assert bench(run, "--strategy", "beam", "-n", "3", "--value", "oracle") == 0
    assert "--value oracle: the task's own tests score" in capsys.readouterr().err
    scored = 0
    for row in read_episodes(run):
        assert row.setting == "beam W=2 N=3 value=oracle" and row.strategy is not None
        assert row.strategy.oracle and row.outcome == "pass", row.error
        nodes = tree(run, row)
        check_tree(nodes)
        values = [n["value"] for n in nodes if n["value"] is not None]
        assert set(values) <= {0.0, 10.0}
        scored += len(values)
        # a value verified a fork of its own: the forks count the oracle's too
        assert row.search is not None and row.search.forks >= len(values)
        assert row.value_usage is not None and row.value_usage.total_tokens == 0
        for node in nodes:  # 10 exactly for the nodes whose leaf passed
            if node.get("passed") is not None and node["value"] is not None:
                assert (node["value"] == 10.0) == node["passed"], node
    assert scored > 0
    assert bench(tmp_path / "unused", "--value", "oracle", "-n", "2") == 2  # bon takes none
    from turnbon_graph.cli.main import main

    assert main(["report", str(run), "--resamples", "100"]) == 0
    text = (run / "report" / "report.md").read_text()
    assert "value=oracle" in text and "they leak the verifier" in text


def test_a_rubric_of_ones_own_is_what_the_value_model_scores_by(tmp_path: Path) -> None:
    """`--value-rubric @FILE`: the value requests carry that rubric, not the default."""
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("- Prefers listing the folder before writing anything.\n")
    run = tmp_path / "run"
    flags = ["--strategy", "beam", "-n", "2", "--value", "stub", "--value-rubric", f"@{rubric}"]
    assert bench(run, *flags, tasks=["greet-script"]) == 0
    [row] = read_episodes(run)
    assert row.strategy is not None and row.strategy.rubric == rubric.read_text()
    assert row.setting == "beam W=2 N=2"
    assert bench(tmp_path / "r2", "--strategy", "escalate", "--value-rubric", "x") == 2
    # the value function's endpoint, for a run none of whose strategies takes one
    assert bench(tmp_path / "r3", "-n", "2", "--value-api-base", "http://127.0.0.1:9") == 2
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()


async def test_the_rubric_reaches_the_value_requests(stub: StubServer, tmp_path: Path) -> None:
    env = TerminalEnvironment()
    stub.script(give_up_or_look(env))  # two children to compare at the first turn
    rubric = "- Prefers listing the folder before writing anything."
    spec = StrategySpec(name="beam", width=2, rubric=rubric)
    await run_benchmark(
        env, config(stub, spec, n=2), tmp_path / "run", tasks=["greet-script"], progress=False
    )
    asked = [(r.body or {}).get("messages") or [] for r in stub.requests]
    systems = [str(messages[0]["content"]) for messages in asked if is_value_request(messages)]
    assert systems and all(rubric in s and VALUE_RUBRIC not in s for s in systems)


def test_fusion_and_refine_are_settings_of_the_comparison(tmp_path: Path) -> None:
    """`--strategy bon fusion refine`: three settings, each turn chosen by its own
    selector (the turn records say which), labelled as such in the report."""
    run = tmp_path / "run"
    assert bench(run, "--strategy", "bon", "fusion", "refine", "-n", "3") == 0
    rows = read_episodes(run)
    assert sorted({r.setting for r in rows}) == ["N=3", "fusion N=3", "refine N=3"]
    prefixes = {"N=3": "llm:", "fusion N=3": "fusion:", "refine N=3": "refine:"}
    for row in rows:
        assert row.strategy is not None and row.outcome in ("pass", "wrong_submission")
        records = [t["record"] for t in read_turns(run, row.setting, row.task, row.trial)]
        asked = {r["selector"] for r in records} - {"unanimous", "single", "agreement", "invalid"}
        assert all(s.startswith(prefixes[row.setting]) for s in asked), (row.setting, asked)
        assert all(r["fallback"] is None for r in records)  # each answered as asked
    assert not (run / "trees").exists()  # unbounded, they run as bon does
    from turnbon_graph.cli.main import main

    assert main(["report", str(run), "--resamples", "100"]) == 0
    text = (run / "report" / "report.md").read_text()
    assert "| fusion N=3 | fusion |" in text and "| refine N=3 | refine |" in text


@pytest.mark.parametrize("strategy", ["beam", "particle", "lookahead"])
def test_with_the_tests_as_the_value_the_best_leaf_is_the_one_chosen(
    strategy: str, tmp_path: Path
) -> None:
    """The verifier as the value: whenever a leaf passed, the chosen one passed (realised
    equals oracle), and no leaf is valued above the chosen one. Particle filtering used
    to choose among the particles drawn last only, dropping a passing leaf for a give-up."""
    run = tmp_path / "run"
    tasks = ["largest-file", "greet-script", "csv-to-json", "word-frequency"]
    command = ["bench", "--env", "terminal", "--model", "stub", "--concurrency", "2"]
    width = [] if strategy == "lookahead" else ["--width", "4"]
    flags = ["--strategy", strategy, *width, "-n", "3", "--value", "oracle"]
    assert main([*command, *flags, "--task", *tasks, "--trials", "2", "--run", str(run)]) == 0
    rows = read_episodes(run)
    assert len(rows) == 2 * len(tasks)
    for row in rows:
        assert row.search is not None, row.error
        leaves = row.search.leaves
        (chosen,) = [leaf for leaf in leaves if leaf.chosen]
        assert all(leaf.held is not None for leaf in leaves)
        best = max((leaf.value for leaf in leaves if leaf.value is not None), default=None)
        assert best is None or chosen.value == best, (row.task, row.trial, leaves)
        if any(leaf.passed for leaf in leaves):
            assert chosen.passed, (row.task, row.trial, leaves)
