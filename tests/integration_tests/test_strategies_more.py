"""The lookahead and escalate search strategies of `turnbon bench` end to end: real
terminal sandboxes (bubblewrap) forked per candidate and per rollout, real verifiers,
the stub policy (or a scripted responder) as generator, selector and value model over
LiteLLM's real HTTP path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration_tests.test_strategies import (
    FATES,
    TASKS,
    TIGHT,
    bench,
    check_budgets,
    check_tree,
    one_episode,
    tree,
)
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import EpisodeResult, read_episodes, read_turns
from turnbon_graph.bench.strategies.escalate import STEP_BY_STEP, escalated_effort
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.values.value import is_value_request
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    is_selector_request,
    tool_call,
)
from turnbon_graph.turn.engine import TurnEngine
from turnbon_terminal import TerminalEnvironment, stub_policy

MORE_TASKS = ["largest-file", "greet-script", "sales-total", "word-frequency", "active-emails"]
WITH_ROLLOUTS = FATES | {"rollout"}


def bench_rows(
    run: Path, *flags: str, tasks: list[str] = TASKS
) -> tuple[list[EpisodeResult], dict[str, Any]]:
    """`turnbon bench` on the stub into `run`: its episode rows, one a task, and the
    strategy its settings file records."""
    assert bench(run, *flags, tasks=tasks) == 0
    rows = read_episodes(run)
    assert sorted(r.task for r in rows) == sorted(tasks)
    return rows, json.loads((run / "run.json").read_text())["strategy"]


def chosen_path(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chosen node and its ancestors, root excluded, first step first."""
    by_id = {n["id"]: n for n in nodes}
    path, node = [], next(n for n in nodes if n["fate"] == "chosen")
    while node["parent"] is not None:
        path.append(node)
        node = by_id[node["parent"]]
    return path[::-1]


def nodes_where(run: Path, test: Callable[[dict[str, Any]], bool]) -> int:
    """How many tree nodes of the run's episodes pass `test`."""
    return sum(test(node) for row in read_episodes(run) for node in tree(run, row))


def generator_requests(stub: StubServer) -> list[dict[str, Any]]:
    return [
        r.body or {}
        for r in stub.requests
        if not is_selector_request(r) and not is_value_request((r.body or {}).get("messages") or [])
    ]


# ---------------------------------------------------------------------------- lookahead


def test_lookahead_on_the_command_line_records_its_rollouts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rows, strategy = bench_rows(run, "--strategy", "lookahead", "-n", "3", "--horizon", "1")
    assert strategy["name"] == "lookahead" and strategy["horizon"] == 1
    rollouts = 0
    for row in rows:
        assert row.setting == "lookahead H=1 N=3" and row.n == 3
        assert row.strategy == StrategySpec(name="lookahead", horizon=1)
        assert row.outcome in ("pass", "wrong_submission"), row.error
        assert row.tokens is not None and row.value_usage is not None
        nodes = tree(run, row)
        check_tree(nodes, WITH_ROLLOUTS)
        by_id = {n["id"]: n for n in nodes}
        for node in nodes:
            if node["fate"] != "rollout":
                continue
            rollouts += 1
            parent = by_id[node["parent"]]
            # A rollout continues a candidate (or its own last step) in a fork of its own,
            # never in the environment the candidate ran in.
            assert parent["fate"] in ("kept", "pruned", "rollout")
            assert node["fork"] != parent["fork"] or parent["fate"] == "rollout"
        # The real trajectory keeps the chosen candidates' steps only: no rollout turn on
        # its path, in its turns file or its turn count.
        path = chosen_path(nodes)
        assert all(n["fate"] != "rollout" for n in path)
        assert len(list(read_turns(run, row.setting, row.task, row.trial))) == len(path)
        assert row.turns == len(path)
    assert rollouts > 0  # N=3 on the stub disagrees on some turn: there was something to roll out


def test_lookahead_passes_at_least_as_often_as_bon_at_the_same_n(tmp_path: Path) -> None:
    assert bench(tmp_path / "bon", "-n", "3", tasks=MORE_TASKS) == 0
    flags = ("--strategy", "lookahead", "-n", "3", "--horizon", "1")
    assert bench(tmp_path / "lookahead", *flags, tasks=MORE_TASKS) == 0
    bon = sum(r.passed for r in read_episodes(tmp_path / "bon"))
    lookahead = sum(r.passed for r in read_episodes(tmp_path / "lookahead"))
    assert lookahead >= bon
    assert lookahead == len(MORE_TASKS)  # the rollouts show which candidate leads to the solution


def forking(value: dict[str, float]) -> Any:
    """Two candidates at the start (each leaves its own file); a rollout (n=1) leaves a
    file naming its branch; then the trajectory lists the folder and says it is done. A
    value request is scored by the rollout file its transcript shows (`value`)."""

    def respond(request: CapturedRequest) -> dict[str, Any]:
        body = request.body or {}
        messages = body.get("messages") or []
        n = int(body.get("n") or 1)
        if is_value_request(messages):
            shown = str(messages[-1].get("content"))
            score = next((v for k, v in value.items() if k in shown), 0.0)
            return chat_completion(json.dumps({"reason": "scripted", "score": score}))
        commands = [
            json.loads(c["function"]["arguments"])["command"]
            for m in messages
            for c in m.get("tool_calls") or []
        ]
        if not commands:
            calls = ["echo a > branch-a.txt", "echo b > branch-b.txt"]
        elif len(commands) == 1 and n == 1:  # a rollout after a candidate's step
            calls = [f"touch rollout-{commands[0].split()[1]}.txt && ls"]
        elif len(commands) == 1:
            calls = ["ls"] * n
        else:
            return chat_completion(choices=[choice("Done.", index=k) for k in range(n)])
        replies = [
            choice(None, [tool_call("shell", {"command": c})], index=k)
            for k, c in enumerate(calls[:n])
        ]
        return chat_completion(choices=replies)

    return respond


def listing(stub: StubServer) -> str:
    """What the real trajectory's `ls` showed (the request after it, asking for 2)."""
    [shown] = [
        str([m for m in body["messages"] if m.get("role") == "tool"][1]["content"])
        for body in generator_requests(stub)
        if int(body.get("n") or 1) == 2
        and sum(m.get("role") == "tool" for m in body["messages"]) == 2
    ]
    return shown


@pytest.mark.parametrize(
    ("value", "taken"),
    [({"rollout-b": 9.0, "rollout-a": 4.0}, "b"), ({"rollout-": 5.0}, "a")],
    ids=["by-value", "ties-to-the-first"],
)
async def test_lookahead_takes_the_best_rollouts_candidate_and_keeps_none_of_the_rollout(
    stub: StubServer, tmp_path: Path, value: dict[str, float], taken: str
) -> None:
    stub.script(forking(value))
    row, run = await one_episode(stub, tmp_path, StrategySpec(name="lookahead", horizon=1))
    other = "a" if taken == "b" else "b"
    # Each candidate was rolled out in a fork of the environment its step ran in: the
    # rollout's listing, in the value request, shows that candidate's file and not its
    # sibling's.
    scored = [
        str((r.body or {})["messages"][-1]["content"])
        for r in stub.requests
        if is_value_request((r.body or {}).get("messages") or [])
    ]
    assert len(scored) == 2
    for branch, sibling in (("a", "b"), ("b", "a")):
        [shown] = [s for s in scored if f"touch rollout-{branch}.txt" in s]
        assert shown.count(f"rollout-{branch}.txt") == 2  # the command, and the listing
        assert f"branch-{sibling}" not in shown
    # The real trajectory went on from the chosen candidate's step alone: its listing has
    # that candidate's file, not the other's, and nothing the rollouts left.
    shown = listing(stub)
    assert f"branch-{taken}.txt" in shown
    assert f"branch-{other}.txt" not in shown
    assert "rollout-" not in shown
    nodes = tree(run, row)
    check_tree(nodes, WITH_ROLLOUTS)
    first = [n for n in nodes if n["turn"] == 1]
    assert {n["action"]: n["fate"] for n in first} == {
        f"shell: echo {taken} > branch-{taken}.txt": "kept",
        f"shell: echo {other} > branch-{other}.txt": "pruned",
    }
    rolled = [n for n in nodes if n["fate"] == "rollout"]
    assert sorted(n["action"] for n in rolled) == [
        "shell: touch rollout-a.txt && ls",
        "shell: touch rollout-b.txt && ls",
    ]
    for node in rolled:  # scored where it led, in a fork that is neither candidate's
        parent = next(p for p in nodes if p["id"] == node["parent"])
        assert node["value"] == parent["value"] == value.get(f"rollout-{parent['action'][12]}", 5.0)
        assert node["fork"] not in {n["fork"] for n in first}
    assert [n["action"] for n in chosen_path(nodes)] == [
        f"shell: echo {taken} > branch-{taken}.txt",
        "shell: ls",
        "say: Done.",
    ]


async def test_a_lookahead_token_budget_is_never_overspent(
    stub: StubServer, tmp_path: Path
) -> None:
    await check_budgets(stub, tmp_path, StrategySpec(name="lookahead", horizon=2), 3, WITH_ROLLOUTS)
    # The unbounded run rolls out; the tightest budget affords none.
    assert nodes_where(tmp_path / "run-100000", lambda n: n["fate"] == "rollout") > 0
    assert nodes_where(tmp_path / f"run-{TIGHT}", lambda n: n["fate"] == "rollout") == 0


# ---------------------------------------------------------------------------- escalate


def test_escalate_on_the_command_line_records_which_turns_escalated(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rows, strategy = bench_rows(run, "--strategy", "escalate", "-n", "3", tasks=MORE_TASKS)
    assert strategy["name"] == "escalate" and strategy["agree"] == 0.5
    escalated = calm = 0
    for row in rows:
        assert row.setting == "escalate A=0.5 N=3" and row.n == 3
        assert row.strategy == StrategySpec(name="escalate", agree=0.5)
        assert row.outcome in ("pass", "wrong_submission"), row.error
        assert row.value_usage is None  # no value model
        nodes = tree(run, row)
        check_tree(nodes)
        steps = chosen_path(nodes)
        records = [t["record"] for t in read_turns(run, row.setting, row.task, row.trial)]
        assert len(records) == len(steps) == row.turns
        assert row.escalated_turns == sum(r["sampling"]["escalation"] is not None for r in records)
        for node, record in zip(steps, records, strict=True):
            escalation = record["sampling"]["escalation"]
            if node["agreement"] < 0.5:  # disagreement: sampled again, step by step
                escalated += 1
                assert node["escalated"] == "step by step"  # the stub takes no reasoning effort
                assert escalation["agreement"] == node["agreement"]
                assert escalation["threshold"] == 0.5 and len(escalation["candidates"]) == 3
                assert len(record["candidates"]) == 3  # the escalated batch, chosen from
            else:
                calm += 1
                assert node["escalated"] is None and escalation is None
                assert record["agreement"] == node["agreement"]
    assert escalated > 0 and calm > 0  # the stub's N=3 disagrees on some turns, not all


async def test_escalate_asks_a_reasoning_model_one_step_up_and_others_step_by_step(
    stub: StubServer, tmp_path: Path
) -> None:
    env = TerminalEnvironment()
    connection = {"api_base": stub.base_url, "api_key": "x"}
    seen: dict[str, list[dict[str, Any]]] = {}
    for model in ("openai/gpt-5-mini", "openai/stub"):
        stub.reset()
        stub.script(stub_policy(env))
        config = BenchConfig(
            model=model,
            n_values=[3],
            concurrency=1,
            engine_options={"completion_kwargs": connection},
            strategy=StrategySpec(name="escalate"),
        )
        run = tmp_path / model.replace("/", "-")
        rows = await run_benchmark(env, config, run, tasks=MORE_TASKS, progress=False)
        assert not stub.responder_errors
        assert all(r.outcome in ("pass", "wrong_submission") for r in rows)
        turns = [n for r in rows for n in tree(run, r) if n["agreement"] is not None]
        escalated = [n for n in turns if n["escalated"]]
        assert escalated
        assert len(generator_requests(stub)) == len(turns) + len(escalated)
        seen[model] = generator_requests(stub)
        efforts = {n["escalated"] for n in escalated}
        assert efforts == {
            "reasoning_effort=high" if model == "openai/gpt-5-mini" else "step by step"
        }

    def step_by_step(body: dict[str, Any]) -> bool:
        first = body["messages"][0]
        return first["role"] == "system" and STEP_BY_STEP in str(first["content"])

    # gpt-5-mini reasons at medium unasked: an escalated turn asks for high, and no other
    # request asks for any; no request of it carries the step-by-step prompt.
    reasoning = seen["openai/gpt-5-mini"]
    assert not any(step_by_step(b) for b in reasoning)
    assert {b.get("reasoning_effort") for b in reasoning} == {None, "high"}
    # The stub model takes no reasoning effort: its escalated turns are the prompt variant.
    plain = seen["openai/stub"]
    assert not any("reasoning_effort" in b for b in plain)
    assert any(step_by_step(b) for b in plain)


def test_the_escalated_reasoning_effort_is_one_step_above_the_models_own() -> None:
    def effort(model: str, **kwargs: Any) -> str | None:
        return escalated_effort(TurnEngine.from_options(model, completion_kwargs=kwargs).generator)

    assert effort("openai/o3-mini") == "high"  # from its default, medium
    assert effort("openai/gpt-5-mini", reasoning_effort="low") == "medium"
    assert effort("openai/gpt-5-mini", reasoning_effort="minimal") == "low"
    assert effort("openai/gpt-5-mini", reasoning_effort="high") is None  # the strongest it takes
    assert effort("gpt-5.1") == "low"  # its map's default is none
    # LiteLLM lists reasoning_effort for every OpenAI model; gpt-4o-mini does not reason.
    assert effort("openai/gpt-4o-mini") is None
    assert effort("openai/stub") is None


async def test_an_escalate_token_budget_is_never_overspent(
    stub: StubServer, tmp_path: Path
) -> None:
    await check_budgets(stub, tmp_path, StrategySpec(name="escalate"), 3)
    assert nodes_where(tmp_path / "run-100000", lambda n: bool(n["escalated"])) > 0
    assert nodes_where(tmp_path / f"run-{TIGHT}", lambda n: bool(n["escalated"])) == 0


# ---------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    "flags",
    [
        ("--horizon", "2"),
        ("--strategy", "beam", "--horizon", "2"),
        ("--agree", "0.5"),
        ("--strategy", "lookahead", "--agree", "0.5"),
        ("--strategy", "escalate", "--width", "2"),
        ("--strategy", "escalate", "--value", "stub"),
        ("--strategy", "lookahead", "--horizon", "11"),  # above its bound, 10
    ],
    ids=lambda f: " ".join(f),
)
def test_a_flag_of_another_strategy_is_refused_before_anything_runs(
    tmp_path: Path, flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench(tmp_path / "run", "-n", "2", *flags) == 2
    assert not (tmp_path / "run").exists()
    said = capsys.readouterr().err
    flag = next(f for f in flags if f in ("--horizon", "--agree", "--width", "--value"))
    assert flag in said


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--strategy", "escalate", "--agree", "1.5"), "argument --agree: 1.5 is above 1"),
        (("--strategy", "escalate", "--agree", "0"), "argument --agree: 0 is not above 0"),
        (("--strategy", "lookahead", "--horizon", "0"), "argument --horizon: 0 is less than 1"),
        (("--strategy", "beam", "--width", "17"), "argument --width: 17 is above 16"),
        (
            ("--strategy", "particle", "--value-temperature", "inf"),
            "argument --value-temperature: 'inf' is not a finite number",
        ),
        (
            ("--strategy", "particle", "--value-temperature", "nan"),
            "argument --value-temperature: nan is not above 0",
        ),
        (
            ("--strategy", "beam", "--token-budget", "inf"),
            "argument --token-budget: 'inf' is not a finite number",
        ),
    ],
    ids=lambda f: " ".join(f) if isinstance(f, tuple) else "",
)
def test_a_parameter_out_of_range_is_refused_by_the_parser(
    tmp_path: Path, flags: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench(tmp_path / "run", "-n", "2", *flags)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
