"""The Turn-BoN agent inside Inspect AI (`turnbon_inspect`), run by a real `inspect eval`
on the loopback stub (Inspect's OpenAI-compatible provider), in Inspect's local sandbox:
each turn's candidates and choice in the log, the eval's own tools, Inspect's limits over
the selector's calls too, and `turnbon report` over the log folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log

from tests.judges import shown_actions
from turnbon_graph.records import TurnRecord
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    is_selector_request,
    tool_call,
)

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tests" / "inspect_tasks" / "two_turns.py"
RECIPE = re.compile(
    r"^<!-- recipe inspect-react: runs in tests/integration_tests/test_inspect_agent.py -->"
    r"\n```python\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
INSPECT = Path(sys.executable).parent / "inspect"
WRITE = "mkdir -p out && echo hi > out/hello.txt"
"""The one first-turn command that does the task (the others fail or do nothing)."""


def bash(command: str) -> dict[str, Any]:
    return tool_call("bash", {"command": command})


def turns(n: int = 3) -> list[dict[str, Any]]:
    """Two turns of `n` candidates, each turn's actions distinct enough to need a choice:
    the first writes the file (or not), the second submits (or looks again)."""
    first = [bash(WRITE), bash("echo hi > out/hello.txt"), bash("ls")]
    second = [tool_call("submit", {"answer": "done"}), bash("cat out/hello.txt")] * 2
    return [
        chat_completion(choices=[choice(tool_calls=[c], index=i) for i, c in enumerate(calls[:n])])
        for calls in (first, second)
    ]


def judge(
    usage: dict[str, int] | None = None, wanted: tuple[str, ...] = ("mkdir", "submit")
) -> Any:
    """A selector model that picks the first candidate whose tool calls hold one of
    `wanted` (the one writing the file, else the submission), wherever the shuffle put
    it, giving its reason."""

    def answer(request: CapturedRequest) -> dict[str, Any]:
        actions = shown_actions(request)
        for wanted_text in wanted:
            for i, action in enumerate(actions):
                if wanted_text in json.dumps(action["tool_calls"]):
                    reason = f"{wanted_text} does the task"
                    body = json.dumps({"reason": reason, "selected_index": i})
                    return chat_completion(body, usage=usage)
        raise AssertionError(f"no candidate to choose in {actions}")

    return answer


def run_inspect(stub: StubServer, *args: str) -> subprocess.CompletedProcess[str]:
    """`inspect eval ARGS` on the stub, through Inspect's OpenAI-compatible provider."""
    env = {**os.environ, "STUB_API_KEY": "sk-test", "STUB_BASE_URL": stub.base_url}
    return subprocess.run(
        [str(INSPECT), "eval", *args, "--model", "openai-api/stub/stub", "--display", "plain"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def inspect_eval(
    stub: StubServer, task: str, log_dir: Path, *args: str, tasks: Path = TASKS
) -> EvalLog:
    """`inspect eval` of one task of `tasks` on the stub; its log, read back."""
    done = run_inspect(stub, f"{tasks}@{task}", "--log-dir", str(log_dir), *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    logs = sorted(log_dir.glob("*.eval"))
    assert len(logs) == 1, logs
    return read_eval_log(str(logs[0]))


def turn_events(log: EvalLog) -> list[dict[str, Any]]:
    assert log.samples is not None
    return [
        e.data
        for e in log.samples[0].events
        if e.event == "info" and e.source == "turn-bon" and isinstance(e.data, dict)
    ]


def generator_requests(stub: StubServer) -> list[CapturedRequest]:
    return [r for r in stub.requests if not is_selector_request(r)]


def test_react_with_turn_bon_logs_three_candidates_and_the_choice_each_turn(
    tmp_path: Path,
) -> None:
    with StubServer() as stub:
        stub.route(is_selector_request, judge())
        stub.script(*turns())
        # the selector asks its own model role
        role = ("--model-role", "selector=openai-api/stub/judge")
        log = inspect_eval(stub, "two_turns_react", tmp_path, *role)
    assert log.samples is not None
    sample = log.samples[0]
    assert sample.scores is not None and sample.scores["file_written"].value == "C"
    events = turn_events(log)
    assert [len(e["candidates"]) for e in events] == [3, 3]
    first, second = events
    chosen = first["candidates"][first["selected_index"]]
    assert chosen["tool_calls"][0]["args"] == {"command": WRITE}
    assert first["reason"] == "mkdir does the task"
    assert second["candidates"][second["selected_index"]]["tool_calls"][0]["name"] == "submit"
    assert all(e["selector"] == "llm:openai-api/stub/judge" for e in events)
    assert all(e["tokens"]["selector"] > 0 for e in events)
    # one generator call with n=3 a turn, offered react's tools; one selector call a turn
    asked = generator_requests(stub)
    assert [r.body["n"] for r in asked] == [3, 3]
    assert {t["function"]["name"] for t in asked[0].body["tools"]} == {"bash", "submit"}
    asked_judge = [r.body["model"] for r in stub.requests if is_selector_request(r)]
    assert asked_judge == ["judge", "judge"]
    assert {r.body["model"] for r in asked} == {"stub"}
    # only the chosen calls ran: the conversation holds the one bash call, then react's
    # answer from the chosen submit()
    calls = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert [(c.function, c.arguments) for c in calls] == [("bash", {"command": WRITE})]
    assert sample.output.completion == "done"
    records = [TurnRecord.model_validate(r) for r in sample.store["turnbon_turns"]]
    assert [r.n_requested for r in records] == [3, 3]
    assert [r.sampling.native_n for r in records] == [True, True]


def test_named_on_the_command_line_it_runs_the_evals_own_tools(tmp_path: Path) -> None:
    """`--solver turnbon_inspect/turn_bon_agent -S n=2 -S selector=first`: the task's own
    bash, two candidates a turn, the first chosen by rule with no selector call."""
    with StubServer() as stub:
        stub.script(*turns(2))
        log = inspect_eval(
            stub,
            "two_turns",
            tmp_path,
            *("--solver", "turnbon_inspect/turn_bon_agent"),
            *("-S", "n=2", "-S", "selector=first"),
        )
    assert log.samples is not None
    sample = log.samples[0]
    assert sample.scores is not None and sample.scores["file_written"].value == "C"
    assert log.eval.solver == "turnbon_inspect/turn_bon_agent"
    assert log.eval.solver_args == {"n": 2, "selector": "first"}
    asked = generator_requests(stub)
    assert [r.body["n"] for r in asked] == [2, 2]
    assert not any(is_selector_request(r) for r in stub.requests)
    # the task's bash (its use_tools), with react's submit beside it
    assert {t["function"]["name"] for t in asked[0].body["tools"]} == {"bash", "submit"}
    events = turn_events(log)
    assert [(len(e["candidates"]), e["selector"], e["selected_index"]) for e in events] == [
        (2, "first", 0),
        (2, "first", 0),
    ]


def test_a_provider_without_n_is_asked_once_per_candidate(tmp_path: Path) -> None:
    """A provider that answers one choice whatever `n` asks: the turn makes up the rest
    with a call each, and the record says why."""
    with StubServer() as stub:
        stub.route(is_selector_request, judge())
        one_each = [chat_completion(tool_calls=[c]) for c in (bash(WRITE), bash("ls"))]
        submits = [chat_completion(tool_calls=[tool_call("submit", {"answer": "done"})])]
        stub.script(one_each[0], one_each[1], one_each[1], *submits)
        log = inspect_eval(stub, "two_turns_react", tmp_path)
    assert log.samples is not None
    sample = log.samples[0]
    records = [TurnRecord.model_validate(r) for r in sample.store["turnbon_turns"]]
    assert [len(r.candidates) for r in records] == [3, 3]
    assert "answered one choice" in str(records[0].sampling.separate_calls)
    assert records[1].selector == "unanimous"  # three submissions: no selector call
    asked = [r.body.get("n") for r in generator_requests(stub)]
    assert asked == [3, None, None, None, None, None]  # after the shortfall, one a call
    assert sample.scores is not None and sample.scores["file_written"].value == "C"


def test_the_samples_token_limit_counts_the_selectors_calls(tmp_path: Path) -> None:
    """Each generator call reports 18 tokens: the two turns' 36 stay under a limit of 60;
    the selector's 150-token answer goes over it in the first turn, so Inspect stops
    the sample there."""
    big = {"prompt_tokens": 140, "completion_tokens": 10, "total_tokens": 150}
    with StubServer() as stub:
        stub.route(is_selector_request, judge(big))
        stub.script(*turns())
        log = inspect_eval(stub, "two_turns_react", tmp_path, "--token-limit", "60")
    assert log.samples is not None
    sample = log.samples[0]
    assert sample.limit is not None and sample.limit.type == "token"
    assert len(generator_requests(stub)) == 1  # no second turn
    assert sample.scores is not None and sample.scores["file_written"].value == "I"


def test_turnbon_report_reads_the_log_folder(tmp_path: Path) -> None:
    with StubServer() as stub:
        stub.route(is_selector_request, judge())
        stub.script(*turns())
        inspect_eval(stub, "two_turns_react", tmp_path / "logs")
    from turnbon_graph.bench.report.writer import read_run

    settings, episodes = read_run(tmp_path / "logs")
    assert settings is not None and settings.environment == "Inspect AI (local)"
    assert settings.n_values == [3]
    [episode] = episodes
    assert (episode.task, episode.setting, episode.outcome, episode.turns) == (
        "hello",
        "N=3",
        "pass",
        2,
    )
    # the stub's usage: 18 tokens a call, two generator and two selector calls
    assert (episode.usage.generator.total_tokens, episode.usage.selector.total_tokens) == (36, 36)
    done = subprocess.run(
        [sys.executable, "-m", "turnbon_graph.cli", "report", str(tmp_path / "logs")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "logs" / "report" / "report.md").read_text()
    assert "| Environment | Inspect AI (local) |" in report
    assert "| N=3 | 1 | 1 | 100.0% |" in report


def test_an_unknown_selector_is_refused_before_any_call(tmp_path: Path) -> None:
    with StubServer() as stub:
        done = run_inspect(
            stub,
            f"{TASKS}@two_turns",
            *("--log-dir", str(tmp_path), "--solver", "turnbon_inspect/turn_bon_agent"),
            *("-S", "selector=best"),
        )
        assert stub.requests == []
    assert "selector must be one of llm, first, random, majority; got 'best'" in (
        done.stdout + done.stderr
    )


def test_the_docs_recipe_runs_as_written(tmp_path: Path) -> None:
    """docs/inspect.md's task, as the page shows it: four candidates, the one that prints
    hi chosen, then the submission; Inspect's `includes()` scorer passes it."""
    (recipe,) = RECIPE.finditer((ROOT / "docs" / "inspect.md").read_text(encoding="utf-8"))
    (tmp_path / "hello.py").write_text(recipe["code"], encoding="utf-8")
    commands = ["echo hi", "ls", "pwd", "echo hello"]
    first = [choice(tool_calls=[bash(c)], index=i) for i, c in enumerate(commands)]
    second = [tool_call("submit", {"answer": "hi"}), bash("echo again")] * 2
    with StubServer() as stub:
        stub.route(is_selector_request, judge(wanted=("echo hi", "submit")))
        stub.script(
            chat_completion(choices=first),
            chat_completion(
                choices=[choice(tool_calls=[c], index=i) for i, c in enumerate(second)]
            ),
        )
        log = inspect_eval(stub, "hello", tmp_path / "logs", tasks=tmp_path / "hello.py")
    assert log.samples is not None
    sample = log.samples[0]
    assert sample.scores is not None and sample.scores["includes"].value == "C"
    assert [r.body["n"] for r in generator_requests(stub)] == [4, 4]
    ran = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert [c.arguments for c in ran] == [{"command": "echo hi"}]
