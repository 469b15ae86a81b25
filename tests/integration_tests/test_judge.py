"""The trajectory judge against the stub: per-rubric verdicts with evidence, retries of
malformed answers, provider failures, reruns (real LiteLLM HTTP path, no mocks)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import stub_kwargs
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.analysis.judge import (
    JUDGE_ROLE,
    VERDICTS_FILE,
    JudgeVerdict,
    Rubric,
    judge_run,
    load_rubrics,
    read_verdicts,
    verdict_schema,
)
from turnbon_graph.bench.running.runs import EPISODES_FILE, EpisodeResult, RunSettings, turns_path
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import CandidateRecord, LatencySplit, TurnRecord, UsageSplit
from turnbon_graph.testing import CapturedRequest, StubResponse, StubServer, chat_completion, error

MODEL = "openai/judge"
UNCHOSEN = "rm -rf ~/UNCHOSEN-CANDIDATE"
INSTRUCTION = "Fix app.py so that `pytest -q` passes. Do not edit test_app.py."

# (command, output) per turn; a None command is the agent's final message.
LOOPING = [
    ("cat test_app.py", "def test_add():\n    assert add(1, 2) == 3\n[exit code 0]"),
    ("pytest -q", "F\n1 failed in 0.01s\n[exit code 1]"),
    ("pytest -q", "F\n1 failed in 0.01s\n[exit code 1]"),
    ("pytest -q", "F\n1 failed in 0.01s\n[exit code 1]"),
    (None, "All tests pass now."),
]
FIXED = [
    ("sed -i 's/a - b/a + b/' app.py", "(no output)\n[exit code 0]"),
    ("pytest -q", ".\n1 passed in 0.01s\n[exit code 0]"),
    (None, "Fixed the sign in add(); the test passes."),
]


def _record(command: str | None, text: str, n: int) -> dict[str, Any]:
    chosen = CandidateRecord(
        index=0,
        model="openai/agent",
        content="" if command else text,
        tool_calls=[{"name": "shell", "args": {"command": command}, "id": "c0"}] if command else [],
    )
    others = [
        CandidateRecord(
            index=i,
            model="openai/agent",
            tool_calls=[{"name": "shell", "args": {"command": UNCHOSEN}, "id": f"c{i}"}],
        )
        for i in range(1, n)
    ]
    return TurnRecord(
        turn_id=f"t-{command}",
        n_requested=n,
        n_ok=n,
        selected_index=0,
        selector="llm:openai/agent" if n > 1 else "first",
        agreement=1 / n,
        candidates=[chosen, *others],
        usage=UsageSplit(),
        latency_s=LatencySplit(),
    ).to_json()


def write_run(run: Path, episodes: list[tuple[str, str, int, str, list[Any]]]) -> None:
    """A run folder as `turnbon bench` writes it, from (setting, task, trial, outcome, steps)."""
    run.mkdir(parents=True)
    settings = RunSettings(
        environment="terminal",
        model="openai/agent",
        selector="llm:openai/agent",
        n_values=[1, 4],
        trials=1,
        tasks=sorted({e[1] for e in episodes}),
    )
    (run / "run.json").write_text(settings.model_dump_json(), encoding="utf-8")
    with (run / EPISODES_FILE).open("w", encoding="utf-8") as handle:
        for setting, task, trial, outcome, steps in episodes:
            n = int(setting.removeprefix("N="))
            lines = []
            for command, text in steps:
                line: dict[str, Any] = {"record": _record(command, text, n)}
                if command is not None:
                    line["observation"] = [{"tool": "shell", "content": text}]
                lines.append(json.dumps(line))
            path = turns_path(run, setting, task, trial)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            result = EpisodeResult(
                task=task,
                trial=trial,
                setting=setting,
                n=n,
                outcome=outcome,  # type: ignore[arg-type]
                turns=len(steps),
                duration_s=1.0,
            )
            handle.write(result.model_dump_json() + "\n")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    write_run(
        folder,
        [
            ("N=1", "fix-add", 0, "wrong_submission", LOOPING),
            ("N=4", "fix-add", 0, "pass", FIXED),
        ],
    )
    return folder


def user_text(request: CapturedRequest) -> str:
    assert request.body is not None
    return str(request.body["messages"][1]["content"])


def rubric_title(request: CapturedRequest) -> str:
    match = re.search(r"^## Rubric: (.+)$", user_text(request), re.MULTILINE)
    assert match is not None
    return match.group(1)


def verdict(answer: str, evidence: str = "", turns: list[int] | None = None) -> dict[str, Any]:
    body = {"evidence": evidence, "turns": turns or [], "answer": answer}
    return chat_completion(json.dumps(body))


LOOP_AT_4 = '"turn": 4, "action": "$ pytest -q"'


def judge_model(request: CapturedRequest) -> dict[str, Any]:
    """Plays a judge: flags looping where pytest runs at turns 2 to 4, nothing else."""
    if rubric_title(request) == "Looping" and LOOP_AT_4 in user_text(request):
        evidence = "turns 2, 3 and 4 rerun `pytest -q`, which fails each time"
        return verdict("yes", evidence, [4, 2, 3])
    return verdict("no", "nothing in the trajectory shows it")


def judge(stub: StubServer, run: Path, **options: Any) -> Any:
    options.setdefault("progress", False)
    options.setdefault("response_format", False)
    return judge_run(run, MODEL, completion_kwargs=stub_kwargs(stub.base_url), **options)


def by_key(verdicts: list[JudgeVerdict]) -> dict[tuple[str, str], JudgeVerdict]:
    return {(v.setting, v.rubric): v for v in verdicts}


async def test_each_rubric_gets_a_verdict_with_evidence(stub: StubServer, run: Path) -> None:
    stub.script(judge_model)
    rubrics = load_rubrics()
    verdicts = await judge(stub, run, instructions={"fix-add": INSTRUCTION})
    everyone = [r.id for r in rubrics if r.applies_to == "all"]
    # Reward hacking is asked about the passing attempt only.
    assert sorted(v.rubric for v in verdicts if v.setting == "N=1") == sorted(everyone)
    assert sorted(v.rubric for v in verdicts if v.setting == "N=4") == sorted(
        [*everyone, "reward_hacking"]
    )
    assert len(stub.requests) == len(verdicts) == 2 * len(everyone) + 1
    looping = by_key(verdicts)[("N=1", "looping")]
    assert looping.answer == "yes" and looping.turns == [2, 3, 4]
    assert "turns 2, 3 and 4" in looping.evidence
    assert looping.attempts == 1 and looping.error is None and looping.usage.calls == 1
    assert looping.model == MODEL and (looping.task, looping.trial) == ("fix-add", 0)
    others = [v for v in verdicts if v is not looping]
    assert {v.answer for v in others} == {"no"}
    # Written as they arrived, and read back the same.
    lines = (run / VERDICTS_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(verdicts)
    assert sorted(read_verdicts(run), key=lambda v: v.key) == sorted(verdicts, key=lambda v: v.key)


async def test_request_carries_the_rubric_and_the_numbered_trajectory(
    stub: StubServer, run: Path
) -> None:
    stub.script(judge_model)
    looping = load_rubrics()[0]
    await judge(stub, run, rubrics=[looping], instructions={"fix-add": INSTRUCTION})
    first = next(r for r in stub.requests if '"turn": 5' in user_text(r))
    assert first.body is not None and first.body["model"] == "judge"
    system, message = first.body["messages"]
    assert system["role"] == "system" and system["content"].startswith(JUDGE_ROLE)
    assert message["role"] == "user"
    user = message["content"]
    assert rubric_title(first) == "Looping"
    assert looping.question in user
    # The task, then every turn with its number, action and output, then the final message.
    assert f"<task>\n{json.dumps(INSTRUCTION)}\n</task>" in user
    assert '{"turn": 1, "action": "$ cat test_app.py", "output": "def test_add()' in user
    for turn in (2, 3, 4):
        assert f'{{"turn": {turn}, "action": "$ pytest -q", "output": "F\\n1 failed' in user
    assert '{"turn": 5, "final_message": "All tests pass now."}' in user
    assert "## Trajectory (5 turns)" in user and "(1 to 5)" in user
    # Only the executed action is shown, never the candidates that were not picked.
    assert all(UNCHOSEN not in user_text(r) for r in stub.requests)
    # The rubric comes after the trajectory: the shared prefix can be cached.
    assert user.index("</trajectory>") < user.index("## Rubric: Looping")


async def test_unknown_instruction_is_said_so(stub: StubServer, run: Path) -> None:
    stub.script(judge_model)
    await judge(stub, run, rubrics=[load_rubrics()[0]], settings=["N=1"])
    (request,) = stub.requests
    assert "The task instruction is not available" in user_text(request)


async def test_response_format_is_the_verdict_schema_when_enabled(
    stub: StubServer, run: Path
) -> None:
    stub.script(judge_model)
    await judge(stub, run, rubrics=[load_rubrics()[0]], settings=["N=1"], response_format=True)
    (request,) = stub.requests
    assert request.body is not None
    sent = request.body["response_format"]["json_schema"]
    assert sent["schema"] == verdict_schema() and sent["strict"] is True


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("I would say yes, looping happens.", "it is not a JSON object"),
        (json.dumps({"answer": "maybe", "evidence": "", "turns": []}), "answer"),
        (json.dumps({"answer": "yes", "evidence": "", "turns": [2]}), "needs evidence"),
        (
            json.dumps({"answer": "yes", "evidence": "it loops at turn 2", "turns": []}),
            "turn numbers",
        ),
        (json.dumps({"answer": "no", "evidence": "x", "turns": [9]}), "out of range"),
        (json.dumps({"answer": "yes", "evidence": "it loops a lot", "turns": [2]}), "cites none"),
    ],
)
async def test_malformed_answers_are_retried_then_unknown(
    stub: StubServer, run: Path, answer: str, problem: str
) -> None:
    stub.script(chat_completion(answer))
    verdicts = await judge(
        stub, run, rubrics=[load_rubrics()[0]], settings=["N=1"], max_invalid_retries=2
    )
    (result,) = verdicts
    assert result.answer == "unknown" and result.evidence == "" and result.turns == []
    assert result.attempts == 3 and result.usage.calls == 3
    assert result.error is not None and result.error.startswith("invalid answer")
    assert problem in result.error
    assert result.raw_answer == answer
    # The stub saw the question, then each re-ask with the answer and the problem stated.
    _, second, third = stub.requests
    assert second.body is not None and third.body is not None
    roles = [m["role"] for m in third.body["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert second.body["messages"][2] == {"role": "assistant", "content": answer}
    retry = second.body["messages"][3]["content"]
    assert retry.startswith("Your answer could not be used") and problem in retry
    assert "(1 to 5)" in retry


async def test_a_retry_that_answers_well_is_kept(stub: StubServer, run: Path) -> None:
    stub.script(
        verdict("yes", "pytest fails again and again", [2, 3, 4]),
        verdict("yes", "turn 2, turn 3 and turn 4 rerun pytest", [2, 3, 4]),
    )
    (result,) = await judge(stub, run, rubrics=[load_rubrics()[0]], settings=["N=1"])
    assert result.answer == "yes" and result.turns == [2, 3, 4] and result.attempts == 2
    assert result.error is None and len(stub.requests) == 2


async def test_a_provider_error_ends_as_unknown_without_stopping_the_run(
    stub: StubServer, run: Path
) -> None:
    stub.route(lambda r: rubric_title(r) == "Looping", error(500, "judge backend down"))
    stub.script(judge_model)
    rubrics = load_rubrics()[:3]
    verdicts = await judge(
        stub,
        run,
        rubrics=rubrics,
        settings=["N=1"],
        client=LiteLLMClient(max_retries=1, backoff_base=0.01),
    )
    results = {v.rubric: v for v in verdicts}
    failed = results["looping"]
    assert failed.answer == "unknown" and failed.attempts == 1 and failed.usage.calls == 0
    assert failed.error is not None and failed.error.startswith("the judge call failed")
    assert "judge backend down" in failed.error
    # The client retried the 500 once; the other rubrics were answered.
    assert sum(rubric_title(r) == "Looping" for r in stub.requests) == 2
    assert [results[r.id].answer for r in rubrics[1:]] == ["no", "no"]


async def test_a_rerun_skips_finished_verdicts(stub: StubServer, run: Path) -> None:
    rubrics = load_rubrics()[:2]
    stub.route(lambda r: rubric_title(r) == "Looping", error(400, "bad request"))
    stub.script(judge_model)
    first = await judge(stub, run, rubrics=rubrics)
    assert len(first) == 4 and len(stub.requests) == 4
    assert {v.answer for v in first if v.rubric == "looping"} == {"unknown"}

    # A kill mid-write leaves a torn line: skipped, and nothing is asked again.
    with (run / VERDICTS_FILE).open("a", encoding="utf-8") as handle:
        handle.write('{"setting": "N=1", "task": "fix-a')
    stub.reset()
    stub.script(judge_model)
    again = await judge(stub, run, rubrics=rubrics)
    assert stub.requests == []
    assert sorted(again, key=lambda v: v.key) == sorted(first, key=lambda v: v.key)

    # Asking again for the unknown ones only; the new verdict replaces the old one.
    retried = await judge(stub, run, rubrics=rubrics, retry_unknown=True)
    assert len(stub.requests) == 2
    assert {rubric_title(r) for r in stub.requests} == {"Looping"}
    assert len(retried) == 4
    assert by_key(retried)[("N=1", "looping")].answer == "yes"
    assert by_key(read_verdicts(run))[("N=4", "looping")].answer == "no"

    # A rubric added later is asked about without redoing the others.
    stub.reset()
    stub.script(judge_model)
    extra = Rubric(id="extra", title="Extra", question="Did the agent run pytest?")
    await judge(stub, run, rubrics=[*rubrics, extra])
    assert len(stub.requests) == 2 and {rubric_title(r) for r in stub.requests} == {"Extra"}


async def test_verdicts_of_another_judge_are_not_mixed_in(stub: StubServer, run: Path) -> None:
    stub.script(judge_model)
    await judge(stub, run, rubrics=load_rubrics()[:1])
    stub.reset()
    with pytest.raises(ConfigurationError, match="another judge model"):
        await judge_run(
            run,
            "openai/other",
            rubrics=load_rubrics()[:1],
            completion_kwargs=stub_kwargs(stub.base_url),
            progress=False,
        )
    assert stub.requests == []
    # ...unless they go to their own file.
    stub.script(StubResponse(body=verdict("no", "none")))
    other = await judge_run(
        run,
        "openai/other",
        rubrics=load_rubrics()[:1],
        completion_kwargs=stub_kwargs(stub.base_url),
        progress=False,
        response_format=False,
        path=run / "judge-other.jsonl",
    )
    assert len(other) == 2 and {v.model for v in other} == {"openai/other"}
