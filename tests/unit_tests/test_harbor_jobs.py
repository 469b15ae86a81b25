"""A Harbor job folder read as episodes (`turnbon_graph.bench.readers.harbor_jobs`) and reported.

The fixture is a real job, trimmed: `harbor run -p tests/integration_tests/harbor_tasks
-a turnbon_harbor:TurnBoNAgent -m openai/stub --ak n=4 -k 2 -e podman` against the stub
model of tests/integration_tests/test_harbor_agent.py (hello-file right, greeting-file
wrong, slow-task past its agent timeout), with the trial logs, panes and artifacts left
out, tracebacks cut to their last line, paths made relative to the repository, and the
result.json of one greeting-file trial removed: a trial harbor was killed in (the job's
result.json made as a killed harbor leaves it: `finished_at` unset, one trial running).

`AGENTS` is another real job, trimmed the same way (its trial logs, panes, trajectories
and artifacts left out): `harbor run -c job.json` of three agents on hello-file and
greeting-file, one attempt each, under Podman: the Turn-BoN agent on the stub model
(`--ak n=4`), Harbor's oracle (runs each task's solution) and nop (does nothing).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from turnbon_graph.bench.readers.harbor_jobs import JobSettings, is_job_folder, read_job
from turnbon_graph.bench.report.format import DASH
from turnbon_graph.bench.report.writer import write_report
from turnbon_graph.bench.running.runs import SETTINGS_FILE

JOB = Path(__file__).parent / "data" / "harbor-job"
AGENTS = Path(__file__).parent / "data" / "harbor-agents-job"
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
    result["config"]["agent"] = {"name": "terminus-2", "model_name": "openai/stub"}
    result["agent_result"]["metadata"] = None
    path.write_text(json.dumps(result))
    (path.parent / "agent" / "turns.jsonl").unlink()
    _, episodes = read_job(job)
    other = next(e for e in episodes if e.setting != "N=4")
    assert (other.setting, other.n, other.outcome) == ("terminus-2 openai/stub", 1, "pass")
    assert other.usage.generator.prompt_tokens == 2300  # Harbor's totals, all generator
    assert other.usage.selector.calls == 0


def test_a_jobs_settings_are_its_agents_as_it_ran_them() -> None:
    settings, episodes = read_job(AGENTS)
    # one per agent of the job's config, in its order; the oracle and nop have no N
    assert isinstance(settings, JobSettings)
    assert settings.labels == ["N=4", "oracle", "nop"]
    assert settings.agent_models == {"N=4": "openai/stub", "oracle": None, "nop": None}
    assert [s.label for s in settings.settings()] == ["N=4", "oracle", "nop"]
    assert (settings.model, settings.selector) == ("openai/stub", "llm:openai/stub")
    assert settings.n_values == [4] and settings.trials == 1
    assert settings.total_trials == 6 and settings.complete
    by = {(e.setting, e.task): e.outcome for e in episodes}
    assert by == {
        ("N=4", "hello-file"): "pass",
        ("N=4", "greeting-file"): "wrong_submission",
        ("oracle", "hello-file"): "pass",
        ("oracle", "greeting-file"): "pass",
        ("nop", "hello-file"): "wrong_submission",
        ("nop", "greeting-file"): "wrong_submission",
    }


def test_a_job_of_several_models_names_each_setting_by_its_model(job: Path) -> None:
    config = json.loads((job / "config.json").read_text())
    (agent,) = config["agents"]
    config["agents"] = [agent, {**agent, "model_name": "openai/other"}]
    (job / "config.json").write_text(json.dumps(config))
    settings, episodes = read_job(job)
    assert settings.labels == ["N=4 openai/stub", "N=4 openai/other"]
    assert settings.model == "openai/other, openai/stub"
    assert {e.setting for e in episodes} == {"N=4 openai/stub"}


def test_an_oracle_job_reports_its_agent_and_is_complete(tmp_path: Path) -> None:
    report = write_report(AGENTS, tmp_path).read_text()
    summary = report.split("## Pass rate")[0]
    assert "| Settings | N=4, oracle, nop |" in summary
    assert "| Model | N=4: `openai/stub`, oracle: no model, nop: no model |" in summary
    assert "| Episodes | 6 of 6 trials (Harbor finished the job) |" in summary
    assert "unknown" not in summary  # no invented N=1 setting above, no missing model
    assert "Partial" not in report and "turnbon bench" not in report
    assert "| oracle | 2 | 2 | 100.0% |" in report
    assert "| nop | 2 | 0 | 0.0% |" in report


def test_a_job_harbor_finished_is_never_partial(job: Path, tmp_path: Path) -> None:
    # a trial cancelled in a job Harbor went on to finish: left out, the job complete
    summary = json.loads((job / "result.json").read_text())
    summary["finished_at"] = summary["updated_at"]
    (job / "result.json").write_text(json.dumps(summary))
    report = write_report(job, tmp_path).read_text()
    assert "| Episodes | 5 of 6 trials (Harbor finished the job) |" in report
    assert "Partial" not in report and "resume" not in report


def test_a_job_whose_every_trial_has_its_result_is_complete(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(AGENTS, job)
    (job / "result.json").unlink()  # Harbor's own summary lost: the trials tell
    settings, _ = read_job(job)
    assert settings.complete and settings.total_trials == 6
    (trial(job, "hello-file", 1) / "result.json").unlink()
    settings, _ = read_job(job)
    assert not settings.complete


def test_a_job_harbor_was_stopped_in_resumes_in_harbor(tmp_path: Path) -> None:
    report = write_report(JOB, tmp_path).read_text()
    assert "> **Partial run:** 5 of 6 episodes have finished (N=4 5/6)." in report
    assert f"`harbor job resume -p {JOB}`" in report
    assert "turnbon bench" not in report


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
