"""What a search keeps, what it spends and what it measures, end to end: beam search
keeps the top W of the finished and live trajectories together; every call's
`max_tokens` is clamped to what the episode has left, in the unit its budget counts;
every finished leaf is verified, the chosen one's verdict being the outcome; a value
model that fails every call makes the run exit non-zero. Real terminal sandboxes,
real verifiers, LiteLLM's real HTTP path to the loopback stub."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration_tests.test_strategies import TASKS, bench, check_tree, one_episode, tree
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import read_episodes
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.values.value import is_value_request
from turnbon_graph.cli.main import main
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    error,
    tool_call,
)
from turnbon_terminal import TerminalEnvironment, stub_policy
from turnbon_terminal.task.folders import read_task_text

GIVE_UP = "I looked around and believe nothing more is needed."


def solution(env: TerminalEnvironment, task: str) -> str:
    [found] = [t for t in env.terminal_tasks() if t.id == task]
    assert found.solution_script is not None
    return read_task_text(found.solution_script)


def scripted(
    env: TerminalEnvironment, replies: Callable[[int, int], list[dict[str, Any]]]
) -> Callable[[CapturedRequest], dict[str, Any]]:
    """A generator answering `replies(tool results so far, n)` (the first n of them);
    the stub policy plays the value model."""
    policy = stub_policy(env)

    def respond(request: CapturedRequest) -> dict[str, Any]:
        body = request.body or {}
        messages = body.get("messages") or []
        if is_value_request(messages):
            return policy(request)
        n = int(body.get("n") or 1)
        ran = sum(1 for m in messages if m.get("role") == "tool")
        shown = replies(ran, n)[:n]
        return chat_completion(choices=[{**c, "index": k} for k, c in enumerate(shown)])

    return respond


def give_up_or_look(env: TerminalEnvironment) -> Callable[[CapturedRequest], dict[str, Any]]:
    """greet-script: at the start one candidate gives up and one lists the folder; after
    the listing, the solution; after it, "Done.". The stub policy plays the value model:
    a give-up scores 1, a look 3, the solution 8, "Done." after it 10."""
    solved = solution(env, "greet-script")

    def replies(ran: int, n: int) -> list[dict[str, Any]]:
        if ran == 0:
            return [choice(GIVE_UP), choice(None, [tool_call("shell", {"command": "ls"})])]
        if ran == 1:
            return [choice(None, [tool_call("shell", {"command": solved})])] * n
        return [choice("Done.")] * n

    return scripted(env, replies)


async def test_beam_never_lets_a_finished_low_valued_path_evict_a_better_live_one(
    stub: StubServer, tmp_path: Path
) -> None:
    """W=1, N=2: the give-up (1) finished at turn 1 and the listing (3) is live. The old
    rule held the give-up in the one slot and pruned the listing, then verified the
    give-up (a wrong submission); the top 1 of both is the listing, which solves it."""
    env = TerminalEnvironment()
    stub.script(give_up_or_look(env))
    row, run = await one_episode(stub, tmp_path, StrategySpec(name="beam", width=1))
    assert row.outcome == "pass", row.error
    nodes = tree(run, row)
    check_tree(nodes)
    first = {n["action"]: n for n in nodes if n["turn"] == 1}
    gave_up, looked = first[f"say: {GIVE_UP}"], first["shell: ls"]
    assert (gave_up["fate"], gave_up["ended"], gave_up["value"]) == ("pruned", "final answer", 1.0)
    assert (looked["fate"], looked["value"]) == ("kept", 3.0)
    # Every finished leaf was verified before its environment closed: the give-up fails,
    # the chosen one passes, and its verdict is the episode's outcome.
    assert gave_up["passed"] is False
    [chosen] = [n for n in nodes if n["fate"] == "chosen"]
    assert chosen["passed"] is True and chosen["ended"] == "final answer"
    assert row.search is not None
    leaves = {leaf.node: leaf for leaf in row.search.leaves}
    assert set(leaves) == {gave_up["id"], chosen["id"]}
    assert leaves[chosen["id"]].chosen and leaves[chosen["id"]].passed
    assert (leaves[gave_up["id"]].value, leaves[gave_up["id"]].passed) == (1.0, False)
    assert row.search.verify_s > 0  # the give-up's verification, recorded apart
    # ls and the solution ran; the first turn's two children each ran in a fork
    assert row.search.steps == 2 and row.search.forks == 2


GREEDY = 5000
"""Completion tokens a greedy model spends on every answer when no max_tokens caps it."""


def greedy(env: TerminalEnvironment, caps: list[int | None]) -> Callable[[CapturedRequest], Any]:
    """The stub policy, billing every answer as many completion tokens as `max_tokens`
    allows (a reasoning model that thinks until it is stopped), `GREEDY` without one;
    `caps` gets each request's cap (None: it had none)."""
    policy = stub_policy(env)

    def respond(request: CapturedRequest) -> dict[str, Any]:
        body = request.body or {}
        reply = policy(request)
        given = body.get("max_tokens") or body.get("max_completion_tokens")
        caps.append(given)
        cap = int(given or GREEDY)
        answers = len(reply["choices"])
        reply["usage"] = {
            "prompt_tokens": 11,
            "completion_tokens": answers * cap,
            "total_tokens": 11 + answers * cap,
        }
        return reply

    return respond


@pytest.mark.parametrize(
    ("model", "unit", "budget"),
    [
        ("openai/stub", "tokens", 30_000),
        ("openai/stub", "completion", 20_000),
        ("openai/gpt-4o-mini", "usd", 0.01),
    ],
    ids=["tokens", "completion", "usd"],
)
async def test_every_call_is_clamped_to_what_the_budget_has_left(
    stub: StubServer, tmp_path: Path, model: str, unit: str, budget: float
) -> None:
    """A model that spends every token it may: unclamped, one answer would be 5000
    tokens and the episode go far over its budget; clamped, no episode goes over, in
    the unit the budget counts, and each call's max_tokens is at most what was left."""
    env = TerminalEnvironment()
    caps: list[int | None] = []
    stub.script(greedy(env, caps))
    spec = StrategySpec(name="beam", width=2, token_budget=budget, budget_unit=unit)  # type: ignore[arg-type]
    config = BenchConfig(
        model=model,
        n_values=[2],
        concurrency=1,
        engine_options={"completion_kwargs": {"api_base": stub.base_url, "api_key": "x"}},
        strategy=spec,
    )
    rows = await run_benchmark(env, config, tmp_path / "run", tasks=TASKS, progress=False)
    assert not stub.responder_errors
    assert caps and None not in caps  # every call was capped
    for row in rows:
        assert row.search is not None and row.search.unit == unit
        usages = [row.usage.generator, row.usage.selector, row.value_usage, row.search.rollout]
        calls = [u for u in usages if u is not None]
        if unit == "tokens":
            assert row.search.spent == row.tokens
        elif unit == "completion":
            assert row.search.spent == sum(u.completion_tokens for u in calls)
            assert row.tokens is not None and row.tokens > row.search.spent  # prompts apart
        else:
            assert row.search.spent == pytest.approx(sum(u.cost_usd or 0 for u in calls))
        assert 0 < row.search.spent <= budget, row
        assert row.outcome in ("pass", "wrong_submission"), row.error


def failing_value(env: TerminalEnvironment) -> Callable[[CapturedRequest], Any]:
    """The stub policy as generator; every value request answered 404 (no such model)."""
    policy = stub_policy(env)

    def respond(request: CapturedRequest) -> Any:
        if is_value_request((request.body or {}).get("messages") or []):
            return error(404, "The model `no-such-model` does not exist")
        return policy(request)

    return respond


def test_a_value_model_whose_every_call_fails_makes_the_run_exit_non_zero(
    stub: StubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--value openai/no-such-model`: its key is set and its endpoint answers 404, so every
    value call fails. The run says so per setting on stderr, naming the value model and
    its error, and exits 1; the report counts the failures."""
    stub.script(failing_value(TerminalEnvironment()))
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_API_BASE", stub.base_url)
    run = tmp_path / "run"
    flags = ("--strategy", "beam", "-n", "2", "--value", "openai/no-such-model")
    assert bench(run, *flags, tasks=["largest-file"]) == 1
    err = capsys.readouterr().err
    assert "beam W=2 N=2: every value call failed" in err
    assert "value model openai/no-such-model" in err and "does not exist" in err
    [row] = read_episodes(run)
    assert row.search is not None and row.search.value_calls > 0
    assert row.search.value_failed == row.search.value_calls
    assert main(["report", str(run), "--resamples", "100"]) == 0
    text = (run / "report" / "report.md").read_text()
    calls = row.search.value_calls
    assert f"| {calls} + 0 of {calls} |" in text
    assert "**beam W=2 N=2:**" in text and "does not exist" in text


def test_a_value_model_without_its_key_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = tmp_path / "run"
    flags = ("--strategy", "beam", "-n", "2", "--value", "openai/no-such-model")
    assert bench(run, *flags) == 2
    err = capsys.readouterr().err
    assert "--value openai/no-such-model" in err and "OPENAI_API_KEY" in err
    assert "Traceback" not in err and not run.exists()


async def test_particles_that_finished_stay_in_the_pool(stub: StubServer, tmp_path: Path) -> None:
    """Particle filtering at a near-greedy temperature: the particle that finished with
    the solution (10) is drawn again and again and stays; the search ends once every
    draw is a finished particle, and it is the one verified."""
    env = TerminalEnvironment()
    stub.script(stub_policy(env))
    spec = StrategySpec(name="particle", width=3, value_temperature=0.01)
    row, run = await one_episode(stub, tmp_path, spec)
    nodes = tree(run, row)
    check_tree(nodes)
    [chosen] = [n for n in nodes if n["fate"] == "chosen"]
    assert chosen["ended"] == "final answer" and chosen["value"] == 10.0
    # The last resampling's three draws all went to finished particles, which stayed.
    final = [n for n in nodes if n["fate"] in ("held", "chosen")]
    assert all(n["ended"] for n in final) and sum(n["copies"] for n in final) == 3
    assert row.outcome == "pass" and chosen["passed"] is True


def test_leaves_are_in_the_tree_file_as_verified(tmp_path: Path) -> None:
    """A run's tree files carry each leaf's verdict, matching its row's leaves."""
    run = tmp_path / "run"
    assert bench(run, "--strategy", "beam", "-n", "3", "--value", "stub") == 0
    for row in read_episodes(run):
        assert row.search is not None
        by_id = {n["id"]: n for n in tree(run, row)}
        for leaf in row.search.leaves:
            node = by_id[leaf.node]
            assert node["passed"] == leaf.passed and node["ended"] == leaf.ended
            assert node["fate"] == ("chosen" if leaf.chosen else node["fate"])
        chosen = [leaf for leaf in row.search.leaves if leaf.chosen]
        assert len(chosen) == 1 and chosen[0].passed == (row.outcome == "pass")
        assert json.loads(json.dumps(row.search.model_dump()))["leaves"]


def three_to_one(env: TerminalEnvironment) -> Callable[[CapturedRequest], dict[str, Any]]:
    """greet-script: at the start three candidates list the folder and one prints it;
    after either, "Done."; the stub policy values them."""

    def replies(ran: int, n: int) -> list[dict[str, Any]]:
        if ran == 0:
            commands = ["ls", "ls", "pwd", "ls"]
            return [choice(None, [tool_call("shell", {"command": c})]) for c in commands]
        return [choice("Done.")] * n

    return scripted(env, replies)


async def test_particle_keeps_a_particle_per_proposal_duplicates_weighted(
    stub: StubServer, tmp_path: Path
) -> None:
    """Four particles at the start, three proposing `ls`: it runs once, as one particle
    standing for three (the tree says so), not merged into one of equal weight."""
    env = TerminalEnvironment()
    stub.script(three_to_one(env))
    row, run = await one_episode(stub, tmp_path, StrategySpec(name="particle", width=4))
    nodes = tree(run, row)
    check_tree(nodes)
    first = {n["action"]: n for n in nodes if n["turn"] == 1}
    assert {a: n["proposed"] for a, n in first.items()} == {"shell: ls": 3, "shell: pwd": 1}
    assert sum(n["copies"] or 0 for n in first.values()) == 4  # W draws from the two
