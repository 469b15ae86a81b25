"""Terminal-Bench 2's reward file read as Harbor reads it, and the verdict made of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from turnbon_terminal.verdict.reward import (
    OUTPUT_TAIL,
    RewardError,
    output_tail,
    read_reward,
    reward_verdict,
)


def _write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text)


@pytest.mark.parametrize(
    ("files", "value", "source"),
    [
        ({"reward.txt": "1\n"}, 1.0, "reward.txt"),
        ({"reward.txt": " 0.5 "}, 0.5, "reward.txt"),
        ({"reward.txt": "1", "reward.json": '{"reward": 0}'}, 0.0, "reward.json"),
        ({"reward.json": '{"style": 1, "tests": 0.25}'}, 0.25, "reward.json"),
        ({"reward.json": '{"reward": 1, "tests": 0}'}, 1.0, "reward.json"),
        ({"reward.json": "1"}, 1.0, "reward.json"),
    ],
)
def test_the_json_file_comes_first_and_names_the_reward(
    tmp_path: Path, files: dict[str, str], value: float, source: str
) -> None:
    for name, text in files.items():
        _write(tmp_path, name, text)
    reward = read_reward(tmp_path)
    assert (reward.value, reward.source) == (value, source)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "wrote no reward"),
        ({"reward.txt": ""}, "left /logs/verifier/reward.txt empty"),
        ({"reward.txt": "passed"}, "holds 'passed', not a number"),
        ({"reward.txt": "nan"}, "not a finite number"),
        ({"reward.json": "{"}, "is not JSON"),
        ({"reward.json": '{"reward": "1"}'}, "is no number"),
        ({"reward.json": '{"reward": true}'}, "is no number"),
        ({"reward.json": "{}"}, "names no reward"),
    ],
)
def test_a_reward_that_is_not_one_is_an_error(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        _write(tmp_path, name, text)
    with pytest.raises(RewardError, match=message):
        read_reward(tmp_path)


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("1\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.txt").symlink_to(secret)
    with pytest.raises(RewardError, match="is a symbolic link"):
        read_reward(logs)


@pytest.mark.parametrize(
    ("reward", "passed", "reason"),
    [("1", True, None), ("2", True, None), ("0", False, None), ("0.99", False, "reward 0.99")],
)
def test_only_a_reward_of_one_passes_and_the_value_is_kept(
    tmp_path: Path, reward: str, passed: bool, reason: str | None
) -> None:
    _write(tmp_path, "reward.txt", reward)
    _write(tmp_path, "test-stdout.txt", "x" * (OUTPUT_TAIL + 10) + "END")
    verdict = reward_verdict(tmp_path, timed_out=None, network=True)
    assert verdict.passed is passed and verdict.reward == float(reward)
    assert verdict.error is None
    assert (verdict.reason or None) == (reason and f"{reason} (a pass needs 1)")
    assert verdict.output.endswith("END") and len(verdict.output) == OUTPUT_TAIL


def test_a_timeout_is_a_fail_and_no_reward_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "reward.txt", "1")
    late = reward_verdict(tmp_path, timed_out=10.0, network=True)
    assert not late.passed and late.reward is None and late.error is None
    assert late.reason == "tests/test.sh did not finish within 10 s"
    (tmp_path / "reward.txt").unlink()
    online = reward_verdict(tmp_path, timed_out=None, network=True)
    offline = reward_verdict(tmp_path, timed_out=None, network=False)
    assert online.error is not None and "network" not in online.error
    # no network, but nothing says it was the cause: no hint
    assert offline.error is not None and "network" not in offline.error
    assert output_tail(tmp_path) == ""
    _write(tmp_path, "test-stdout.txt", "Err:1 http://deb.debian.org bookworm InRelease\n"
           "  Temporary failure resolving 'deb.debian.org'\n")  # fmt: skip
    offline = reward_verdict(tmp_path, timed_out=None, network=False)
    online = reward_verdict(tmp_path, timed_out=None, network=True)
    assert offline.setup_failure is not None
    assert "the container had no network" in offline.setup_failure
    assert online.setup_failure is not None and "network" not in online.setup_failure


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_an_output_file_put_in_place_of_test_shs_is_evidence_never_raised(
    tmp_path: Path, kind: str
) -> None:
    _write(tmp_path, "reward.txt", "1")
    output = tmp_path / "test-stdout.txt"
    if kind == "link":
        output.symlink_to(tmp_path / "reward.txt")
    else:
        os.mkfifo(output)  # a read would block forever: never opened for reading
    verdict = reward_verdict(tmp_path, timed_out=None, network=True)
    assert not verdict.passed and verdict.error is None and verdict.output == ""
    assert len(verdict.tamper) == 1 and "test-stdout.txt is" in verdict.tamper[0]


def test_a_reward_file_that_is_a_fifo_is_the_deliverables_fail(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "reward.txt")
    _write(tmp_path, "test-stdout.txt", "1 passed")
    verdict = reward_verdict(tmp_path, timed_out=None, network=True)
    assert not verdict.passed and verdict.error is None
    assert verdict.tamper == [
        "/logs/verifier/reward.txt is not a regular file: the reward was not read"
    ]
