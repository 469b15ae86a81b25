"""A Harbor job folder read as episodes (`turnbon_graph.bench.readers.harbor_jobs`) and reported.

The fixture is a real job, trimmed: `harbor run -p tests/integration_tests/harbor_tasks
-a turnbon_harbor:TurnBoNAgent -m openai/stub --ak n=4 -k 2 -e podman` against the stub
model of tests/integration_tests/test_harbor_agent.py (hello-file right, greeting-file
wrong, slow-task past its agent timeout), with the trial logs, panes and artifacts left
out, tracebacks cut to their last line, paths made relative to the repository, and the
result.json of one greeting-file trial removed: a trial harbor was killed in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from turnbon_graph.bench.readers.harbor_jobs import is_job_folder, read_job
from turnbon_graph.bench.report.format import DASH
from turnbon_graph.bench.report.writer import write_report
from turnbon_graph.bench.running.runs import SETTINGS_FILE

JOB = Path(__file__).parent / "data" / "harbor-job"
ROOT = Path(__file__).parents[2]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    copy = tmp_path / "job"
    shutil.copytree(JOB, copy)
    return copy


def trial(job: Path, task: str, which: int = 0) -> Path:
    return sorted(p for p in job.iterdir() if p.name.startswith(f"{task}__"))[which]


def test_a_job_folder_is_told_apart_by_its_shape(tmp_path: Path) -> None:
    assert is_job_folder(JOB)
    assert not is_job_folder(trial(JOB, "hello-file"))  # a trial's config names no job
    (tmp_path / SETTINGS_FILE).write_text("{}")
    assert not is_job_folder(tmp_path)


def test_each_finished_trial_is_an_episode_with_the_papers_ending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)  # the trials name their task folders relative to it
    settings, episodes = read_job(JOB)
    assert settings.environment == "Harbor (podman)"
    assert (settings.model, settings.selector) == ("openai/stub", "llm:openai/stub")
    assert settings.n_values == [4] and settings.trials == 2
    assert settings.tasks == ["greeting-file", "hello-file", "slow-task"]
    by_task = {(e.task, e.trial): e for e in episodes}
    # the killed greeting-file trial has no result.json: not finished, left out
    assert sorted(by_task) == [
        ("greeting-file", 0),
        ("hello-file", 0),
        ("hello-file", 1),
        ("slow-task", 0),
        ("slow-task", 1),
    ]
    assert {e.setting for e in episodes} == {"N=4"}
    assert by_task["hello-file", 0].outcome == "pass"
    assert by_task["greeting-file", 0].outcome == "wrong_submission"
    slow = by_task["slow-task", 0]
    assert slow.outcome == "time_limit"  # Harbor graded it (reward 0); it never ended itself
    assert slow.error is not None and slow.error.startswith("AgentTimeoutError: ")
    assert "reward 0" in slow.error
    hello = by_task["hello-file", 0]
    assert (hello.category, hello.difficulty) == ("file-operations", "easy")
    assert "PASS: /app/hello.txt is right" in hello.verifier_output


def test_tokens_and_turns_come_from_the_turn_records() -> None:
    _, episodes = read_job(JOB)
    hello = next(e for e in episodes if e.task == "hello-file")
    # two turns of 4 candidates from one call each (900 prompt, 240 completion tokens),
    # one selector call (500, 20) where echo and printf differed
    assert hello.turns == 2
    assert (hello.usage.generator.prompt_tokens, hello.usage.generator.completion_tokens) == (
        1800,
        480,
    )
    assert (hello.usage.selector.prompt_tokens, hello.usage.selector.completion_tokens) == (
        500,
        20,
    )
    assert hello.prompt_tokens_a_call_each == 4 * 1800
    assert hello.tokens == 1800 + 480 + 500 + 20


def test_without_a_turns_file_the_agents_context_counts(job: Path) -> None:
    (trial(job, "hello-file") / "agent" / "turns.jsonl").unlink()
    _, episodes = read_job(job)
    hello = [e for e in episodes if e.task == "hello-file"]
    assert [e.turns for e in hello] == [2, 2]
    assert [e.usage.selector.prompt_tokens for e in hello] == [500, 500]
    assert sorted(str(e.prompt_tokens_a_call_each) for e in hello) == ["7200", "None"]


def test_another_agents_trials_are_a_setting_of_their_own(job: Path) -> None:
    path = trial(job, "hello-file") / "result.json"
    result = json.loads(path.read_text())
    result["agent_info"]["name"] = "terminus-2"
    result["agent_result"]["metadata"] = None
    path.write_text(json.dumps(result))
    (path.parent / "agent" / "turns.jsonl").unlink()
    _, episodes = read_job(job)
    other = next(e for e in episodes if e.setting != "N=4")
    assert (other.setting, other.n, other.outcome) == ("terminus-2 openai/stub", 1, "pass")
    assert other.usage.generator.prompt_tokens == 2300  # Harbor's totals, all generator
    assert other.usage.selector.calls == 0


@pytest.mark.parametrize(
    ("exception", "outcome"),
    [
        ("ContextLengthExceededError", "out_of_context"),
        ("VerifierTimeoutError", "wrong_submission"),
        ("RewardFileNotFoundError", "agent_error"),
        ("SandboxBuildFailedError", "agent_error"),
        ("MemoryLimitExceededError", "resource_limit"),
    ],
)
def test_harbors_exceptions_are_the_papers_endings(job: Path, exception: str, outcome: str) -> None:
    path = trial(job, "hello-file") / "result.json"
    result = json.loads(path.read_text())
    result["exception_info"] = {"exception_type": exception, "exception_message": "scripted"}
    path.write_text(json.dumps(result))
    _, episodes = read_job(job)
    (ended,) = [e for e in episodes if e.task == "hello-file" and e.error is not None]
    assert ended.outcome == outcome  # never a pass, though its reward was 1
    assert ended.error is not None and ended.error.startswith(f"{exception}: scripted")


def test_a_trial_harbor_cancelled_is_unfinished(job: Path) -> None:
    path = trial(job, "hello-file") / "result.json"
    result = json.loads(path.read_text())
    result["exception_info"] = {"exception_type": "CancelledError", "exception_message": ""}
    path.write_text(json.dumps(result))
    _, episodes = read_job(job)
    assert sum(e.task == "hello-file" for e in episodes) == 1


def test_turnbon_report_prints_the_pass_rate_and_table_1(tmp_path: Path) -> None:
    report = write_report(JOB, tmp_path).read_text()
    assert "| Environment | Harbor (podman) |" in report
    assert "| Episodes | 5 of 6 finished |" in report
    # hello-file 2/2, greeting-file 0/1, slow-task 0/2: a third of the tasks' pass rate
    assert "| N=4 | 5 | 2 | 33.3% |" in report
    table1 = report.split("## Cost (Table 1)")[1].split("\n## ")[0]
    # per attempt: turns (2 + 2 + 2 + 1 + 1) / 5, output tokens (3 x 480 + 2 x 240) / 5
    # of the generator and 2 x 20 / 5 of the selector
    assert f"| N=4 | 5 | 1.6 | 384 | 8 | {DASH} |" in table1  # no baseline
    table2 = report.split("## How attempts end (Table 2)")[1].split("\n## ")[0]
    assert "| N=4 | 5 | 40.0% | 20.0% | 0.0% | 40.0% |" in table2
