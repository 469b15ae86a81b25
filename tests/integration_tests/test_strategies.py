"""Search strategies of `turnbon bench` (`turnbon_graph.bench.strategies`) end to end: real
terminal sandboxes (bubblewrap) forked per branch, real verifiers, the stub policy as
generator and value model over LiteLLM's real HTTP path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import EpisodeResult, read_episodes, read_turns, tree_path
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.values.value import is_value_request
from turnbon_graph.cli.main import main
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    is_selector_request,
    tool_call,
)
from turnbon_terminal import TerminalEnvironment, stub_policy
from turnbon_terminal.stub_policy import billed

TASKS = ["largest-file", "greet-script"]
FATES = {"kept", "pruned", "held", "chosen"}
TIGHT = 100
"""A token budget below the first prompt (by the model's tokenizer): no call fits."""


def tree(run: Path, row: EpisodeResult) -> list[dict[str, Any]]:
    path = tree_path(run, row.setting, row.task, row.trial)
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_tree(nodes: list[dict[str, Any]], fates: set[str] = FATES) -> None:
    """A tree: one root, every parent a node before it, one chosen node, known fates."""
    ids = [n["id"] for n in nodes]
    assert len(set(ids)) == len(ids)
    assert [n for n in nodes if n["parent"] is None] == nodes[:1]
    seen: set[str] = set()
    for node in nodes:
        assert node["parent"] is None or node["parent"] in seen, node
        assert node["fate"] in fates and node["fork"].startswith("e")
        assert node["turn"] == (
            0
            if node["parent"] is None
            else 1 + next(p["turn"] for p in nodes if p["id"] == node["parent"])
        )
        seen.add(node["id"])
    assert sum(n["fate"] == "chosen" for n in nodes) == 1


def bench(run: Path, *flags: str, tasks: list[str] = TASKS) -> int:
    command = ["bench", "--env", "terminal", "--model", "stub", "--concurrency", "1"]
    return main([*command, *flags, "--task", *tasks, "--trials", "1", "--run", str(run)])


def test_beam_on_the_command_line_records_its_strategy_and_trees(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert bench(run, "--strategy", "beam", "--width", "2", "-n", "2") == 0
    rows = read_episodes(run)
    assert sorted(r.task for r in rows) == sorted(TASKS)
    settings = json.loads((run / "run.json").read_text())
    assert settings["strategy"]["name"] == "beam" and settings["strategy"]["width"] == 2
    for row in rows:
        assert row.setting == "beam W=2 N=2" and row.n == 2
        assert row.strategy == StrategySpec(name="beam", width=2)
        assert row.outcome in ("pass", "wrong_submission"), row.error
        assert row.tokens is not None and row.tokens > 0 and row.value_usage is not None
        spent = row.usage.generator.total_tokens + row.usage.selector.total_tokens
        assert row.tokens == spent + row.value_usage.total_tokens
        nodes = tree(run, row)
        check_tree(nodes)
        chosen = next(n for n in nodes if n["fate"] == "chosen")
        assert chosen["ended"] == "final answer"
        # The verified trajectory's turns are the chosen node's path, in the turns file.
        path, node = [], chosen
        while node["parent"] is not None:
            path.append(node)
            node = next(n for n in nodes if n["id"] == node["parent"])
        assert len(list(read_turns(run, row.setting, row.task, row.trial))) == len(path)
        assert row.turns == len(path)


def test_bon_is_unchanged_by_naming_it(tmp_path: Path) -> None:
    """--strategy bon runs today's path: the same episodes, turns and files."""
    plain, named = tmp_path / "plain", tmp_path / "named"
    assert bench(plain, "-n", "2") == 0
    assert bench(named, "--strategy", "bon", "-n", "2") == 0
    for run in (plain, named):
        assert not (run / "trees").exists()
        assert "strategy" not in json.loads((run / "run.json").read_text())

    def chosen(run: Path) -> dict[str, Any]:
        found = {}
        for row in read_episodes(run):
            assert row.setting == "N=2" and row.strategy == StrategySpec()
            records = [t["record"] for t in read_turns(run, row.setting, row.task, row.trial)]
            found[row.task] = (
                row.outcome,
                [
                    [
                        (c["name"], c["args"])
                        for c in r["candidates"][r["selected_index"]]["tool_calls"]
                    ]
                    for r in records
                ],
            )
        return found

    assert chosen(plain) == chosen(named)


def test_width_and_value_are_refused_for_bon(tmp_path: Path) -> None:
    assert bench(tmp_path / "run", "--width", "2", "-n", "2") == 2
    assert not (tmp_path / "run").exists()


def test_beam_passes_at_least_as_often_as_bon_at_the_same_n(tmp_path: Path) -> None:
    tasks = ["largest-file", "greet-script", "sales-total", "word-frequency", "active-emails"]
    assert bench(tmp_path / "bon", "-n", "2", tasks=tasks) == 0
    assert (
        bench(tmp_path / "beam", "--strategy", "beam", "--width", "2", "-n", "2", tasks=tasks) == 0
    )
    bon = sum(r.passed for r in read_episodes(tmp_path / "bon"))
    beam = sum(r.passed for r in read_episodes(tmp_path / "beam"))
    # The value model ranks the solution first wherever a candidate runs it; an episode
    # whose every first candidate gives up ends there, in both settings.
    assert beam >= bon and beam >= len(tasks) - 1


def stub_tokens(requests: list[CapturedRequest]) -> int:
    """What the stub policy billed for `requests` (`stub_policy.billed`, held to a hand
    count in tests/unit_tests/test_terminal_stub_policy.py): the prompt of each request,
    and an answer per choice (the generator's `n`, one for a selector or value call)."""
    total = 0
    for request in requests:
        body = request.body or {}
        answers = int(body.get("n") or 1) if not is_selector_request(request) else 1
        reply = chat_completion(choices=[choice("x", index=k) for k in range(answers)])
        total += billed(reply, body)["usage"]["total_tokens"]
    return total


@pytest.mark.parametrize(
    "strategy",
    [
        StrategySpec(name="beam", width=2),
        StrategySpec(name="particle", width=3),
        StrategySpec(name="bon"),
        StrategySpec(name="fusion"),
        StrategySpec(name="refine"),  # its inner selector's calls metered too
    ],
    ids=lambda s: s.name,
)
async def test_a_token_budget_is_never_overspent(
    stub: StubServer, tmp_path: Path, strategy: StrategySpec
) -> None:
    await check_budgets(stub, tmp_path, strategy, 1 if strategy.name == "particle" else 2)


async def check_budgets(
    stub: StubServer, tmp_path: Path, strategy: StrategySpec, n: int, fates: set[str] = FATES
) -> None:
    """Runs of `strategy` at N=n under growing token budgets: none fails, none spends
    over its budget, an episode that spent nothing ended as budget_exhausted (and only
    such a one), the rows' tokens are what the stub billed, more budget spends more."""
    env = TerminalEnvironment()
    connection = {"api_base": stub.base_url, "api_key": "x"}
    spent: dict[int, int] = {}
    for budget in (TIGHT, 800, 1300, 100_000):
        stub.reset()
        stub.script(stub_policy(env))
        spec = strategy.model_copy(update={"token_budget": budget})
        config = BenchConfig(
            model="openai/stub",
            n_values=[n],
            concurrency=1,
            engine_options={"completion_kwargs": connection},
            strategy=spec,
        )
        run = tmp_path / f"run-{budget}"
        rows = await run_benchmark(env, config, run, tasks=TASKS, progress=False)
        assert not stub.responder_errors
        for row in rows:
            assert row.outcome in ("pass", "wrong_submission", "budget_exhausted"), row.error
            assert row.strategy == spec
            assert row.tokens is not None and row.tokens <= budget
            assert (row.tokens == 0) == (row.outcome == "budget_exhausted"), row
            assert row.search is not None and row.search.spent == row.tokens
            check_tree(tree(run, row), fates)
        # The rows' tokens are what the calls really cost, as the stub billed them.
        assert sum(r.tokens or 0 for r in rows) == stub_tokens(stub.requests)
        spent[budget] = sum(r.tokens or 0 for r in rows)
        if budget == TIGHT:  # the first prompt alone is more: no call, and it says so
            for row in rows:
                assert row.outcome == "budget_exhausted" and row.turns == 0
                assert row.error is not None and "cannot afford one call" in row.error
    assert spent[TIGHT] == 0
    assert spent[TIGHT] <= spent[800] <= spent[1300] <= spent[100_000]


# ---------------------------------------------------------------------------- forks


def branching(request: CapturedRequest) -> dict[str, Any]:
    """Two branches at the start (each leaves its own file), then each lists the
    folder, then says it is done; every value 5."""
    body = request.body or {}
    messages = body.get("messages") or []
    if is_value_request(messages):
        return chat_completion(json.dumps({"reason": "even", "score": 5}))
    ran = sum(1 for m in messages if m.get("role") == "tool")
    if ran == 0:
        commands = ["echo a > branch-a.txt", "echo b > branch-b.txt"]
    elif ran == 1:
        commands = ["ls"] * 2
    else:
        reply = [choice("Done.", index=k) for k in range(int(body.get("n") or 1))]
        return chat_completion(choices=reply)
    calls = [
        choice(None, [tool_call("shell", {"command": c})], index=k) for k, c in enumerate(commands)
    ]
    return chat_completion(choices=calls[: int(body.get("n") or 1)])


async def one_episode(
    stub: StubServer, tmp_path: Path, strategy: StrategySpec
) -> tuple[EpisodeResult, Path]:
    """One greet-script episode of `strategy` at N=2 on what `stub` is scripted with:
    its row and its run folder."""
    config = BenchConfig(
        model="openai/stub",
        n_values=[2],
        engine_options={"completion_kwargs": {"api_base": stub.base_url, "api_key": "x"}},
        strategy=strategy,
    )
    run = tmp_path / "run"
    [row] = await run_benchmark(
        TerminalEnvironment(), config, run, tasks=["greet-script"], progress=False
    )
    assert not stub.responder_errors
    return row, run


async def test_beam_forks_are_real_a_branch_never_sees_its_siblings_files(
    stub: StubServer, tmp_path: Path
) -> None:
    stub.script(branching)
    row, run = await one_episode(stub, tmp_path, StrategySpec(name="beam", width=2))
    listings: dict[str, str] = {}
    for request in stub.requests:
        messages = (request.body or {}).get("messages") or []
        tools = [m for m in messages if m.get("role") == "tool"]
        if len(tools) == 2:  # after `ls`, in one branch or the other
            first = next(
                json.loads(c["function"]["arguments"])["command"]
                for m in messages
                for c in m.get("tool_calls") or []
            )
            listings[first] = str(tools[1]["content"])
    assert set(listings) == {"echo a > branch-a.txt", "echo b > branch-b.txt"}
    assert "branch-a.txt" in listings["echo a > branch-a.txt"]
    assert "branch-b.txt" not in listings["echo a > branch-a.txt"]
    assert "branch-b.txt" in listings["echo b > branch-b.txt"]
    assert "branch-a.txt" not in listings["echo b > branch-b.txt"]
    nodes = tree(run, row)
    check_tree(nodes)
    first_turn = [n for n in nodes if n["turn"] == 1]
    assert len({n["fork"] for n in first_turn}) == 2  # each branch in its own environment


async def test_each_setting_learns_its_costs_apart(stub: StubServer, tmp_path: Path) -> None:
    """Cost estimates are a setting's own: two budgets of beam in one run plan on two
    estimate tables, each learned from its own calls, so what one setting spent never
    moves what another plans."""
    env = TerminalEnvironment()
    stub.script(stub_policy(env))
    beam = StrategySpec(name="beam", width=2)
    config = BenchConfig(
        model="openai/stub",
        n_values=[2],
        concurrency=1,
        engine_options={"completion_kwargs": {"api_base": stub.base_url, "api_key": "x"}},
        strategies=[
            beam.model_copy(update={"token_budget": 1300}),
            beam.model_copy(update={"token_budget": 100_000}),
        ],
    )
    rows = await run_benchmark(env, config, tmp_path / "run", tasks=TASKS, progress=False)
    settings = {r.setting for r in rows}
    assert len(settings) == 2 and set(config.estimates) == settings
    small, large = (config.estimates[s] for s in sorted(settings))
    assert small is not large and small.completions and large.completions
    assert config.estimates_for(sorted(settings)[0]) is small  # one table per setting
