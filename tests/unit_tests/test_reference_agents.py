"""The reference agents' rules and the verifier's set-up failures, checked by hand:
what a sound task does under each agent, which tasks a check lists, how a test.sh whose
own set-up failed is told from a wrong answer, and the flags a reference run refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnbon_graph.bench.agents import as_expected, unsound_tasks
from turnbon_graph.bench.environment import Verdict
from turnbon_graph.bench.episode import verdict_outcome
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.cli import main
from turnbon_terminal.verdict.reward import reward_verdict
from turnbon_terminal.verdict.setup import failed_setup

UV_DOWNLOAD = (
    "curl: (6) Could not resolve host: astral.sh\n"
    "/tests/test.sh: line 3: /root/.local/bin/env: No such file or directory\n"
    "/tests/test.sh: line 4: uvx: command not found\n"
)
PYTEST_FAIL = (
    "collected 2 items\n\ntest_outputs.py F.\n"
    "=========================== 1 failed, 1 passed in 0.12s ===========================\n"
)


def row(task: str, outcome: str) -> EpisodeResult:
    return EpisodeResult.model_validate(
        {"task": task, "trial": 0, "setting": "oracle", "n": 1, "outcome": outcome,
         "turns": 0, "duration_s": 1.0}
    )  # fmt: skip


def test_a_sound_task_passes_the_oracle_and_fails_nop() -> None:
    assert as_expected("pass", "oracle") and not as_expected("wrong_submission", "oracle")
    assert as_expected("wrong_submission", "nop") and not as_expected("pass", "nop")
    # an error or an unverified ending is never what a sound task does
    for ending in ("agent_error", "verifier_failed", "time_limit"):
        assert not as_expected(ending, "oracle") and not as_expected(ending, "nop")


def test_the_task_check_lists_each_task_with_its_unexpected_episodes() -> None:
    rows = [row("a", "pass"), row("b", "wrong_submission"), row("c", "verifier_failed")]
    rows.append(row("b", "pass"))
    wrong = unsound_tasks(rows, "oracle")
    assert list(wrong) == ["b", "c"]
    assert [r.outcome for r in wrong["b"]] == ["wrong_submission"]
    assert list(unsound_tasks(rows, "nop")) == ["a", "b", "c"]


def test_a_failed_download_with_no_test_run_is_a_set_up_failure() -> None:
    assert failed_setup(UV_DOWNLOAD) == "curl: (6) Could not resolve host: astral.sh"
    apt = "Reading package lists...\nE: Unable to locate package python3-pytest\n"
    assert failed_setup(apt) == "E: Unable to locate package python3-pytest"


def test_tests_that_ran_decide_whatever_their_set_up_printed() -> None:
    assert failed_setup(UV_DOWNLOAD + PYTEST_FAIL) is None
    assert failed_setup("Ran 3 tests in 0.001s\n\nFAILED (failures=1)\ncurl: (7) x") is None
    assert failed_setup("FAIL: /app/hello.txt is missing or wrong\n") is None  # no set-up line


def test_a_reward_of_0_after_a_failed_set_up_is_no_verdict_on_the_work(
    tmp_path: Path,
) -> None:
    (tmp_path / "test-stdout.txt").write_text(UV_DOWNLOAD)
    (tmp_path / "reward.txt").write_text("0\n")
    verdict = reward_verdict(tmp_path, timed_out=None, network=True)
    assert verdict.passed is False and verdict.reward == 0.0 and verdict.error is None
    assert verdict.setup_failure is not None
    assert "Could not resolve host: astral.sh" in verdict.setup_failure
    outcome, error = verdict_outcome(verdict)
    assert outcome == "verifier_failed"
    assert error is not None and "set-up failed before its tests ran" in error


def test_no_reward_after_a_failed_set_up_says_so_and_names_the_network(tmp_path: Path) -> None:
    (tmp_path / "test-stdout.txt").write_text(UV_DOWNLOAD)
    verdict = reward_verdict(tmp_path, timed_out=None, network=False)
    assert verdict.error is None and verdict.setup_failure is not None
    assert "the container had no network" in verdict.setup_failure
    assert verdict_outcome(verdict)[0] == "verifier_failed"


def test_a_wrong_answer_stays_a_wrong_answer(tmp_path: Path) -> None:
    (tmp_path / "test-stdout.txt").write_text(PYTEST_FAIL)
    (tmp_path / "reward.txt").write_text("0\n")
    verdict = reward_verdict(tmp_path, timed_out=None, network=True)
    assert verdict.setup_failure is None
    assert verdict_outcome(verdict)[0] == "wrong_submission"
    assert verdict_outcome(Verdict(passed=True, setup_failure=None))[0] == "pass"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["bench", "--agent", "oracle", "--model", "stub"], "--model would be ignored"),
        (["bench", "--agent", "nop", "-n", "2"], "-n would be ignored"),
        (["bench", "--agent", "oracle", "--strategy", "beam"], "--strategy would be ignored"),
        (["run", "largest-file", "--agent", "oracle", "--n", "3"], "--n would be ignored"),
        (["bench"], "required: --model"),
    ],
)
def test_flags_a_reference_agent_would_ignore_are_refused(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert said in capsys.readouterr().err
