"""Terminal-Bench 2's verdict: the reward `tests/test.sh` writes, read as Harbor reads it.

test.sh writes `/logs/verifier/reward.json` (a JSON object of named numbers, or one
number) or `/logs/verifier/reward.txt` (one number); the JSON file is read first, as
Harbor does. TB2's scripts write 1 when the task's tests pass and 0 otherwise, and a
trial passes in Harbor when its reward is 1.0: so a reward of 1 or more is a PASS, and
anything less (0, or a fraction a task gives for part of the work) is a FAIL that keeps
its value. With several named rewards, the one named `reward` counts, else the lowest.

A reward file or output file that is a symbolic link, a FIFO or a device was put there
in place of test.sh's by something in the container: it is never read (nor followed),
never raises, and is tamper evidence; a reward file so replaced is a FAIL, and so is a
reward of 1 beside a replaced output file.

A missing, empty or unreadable reward file is no verdict at all: the verifier could not
do its job (an `agent_error`, drawn again by `--redo-errors`), never a PASS. A test.sh
that does not finish in time is a FAIL, as the pytest verifier's timeout is.

A test.sh whose own set-up failed before its tests ran (TB2's scripts download and
install their test tools: `curl ... | sh`, `apt-get install`, `uvx pytest`) writes 0 or
nothing, and that is no verdict on the agent's work either: when its output shows no
test run (no test runner's summary) and a line of a failed set-up, the verdict says so
with that line (`setup_failure`, the outcome `verifier_failed`; `verdict.setup`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from turnbon_graph.bench.environment import Verdict
from turnbon_terminal.verdict.setup import failed_setup, network_failed

REWARD_JSON = "reward.json"
REWARD_TEXT = "reward.txt"
TEST_OUTPUT = "test-stdout.txt"
"""Where test.sh's output goes (stdout and stderr), in the verifier's log folder."""
OUTPUT_TAIL = 4000
"""Characters of test.sh's output kept in the verdict (its end)."""
PASSING_REWARD = 1.0
_CAP = 64 * 1024
"""Bytes of a reward file read at most."""


class RewardError(Exception):
    """The reward file is missing, empty, or not a number."""


class ForeignFile(RewardError):
    """A file the verifier reads is a symbolic link, a FIFO or a device: something in
    the container put it there in place of test.sh's file (tamper evidence)."""


@dataclass(frozen=True)
class Reward:
    """What the reward file said."""

    value: float
    source: str
    """The file it came from (reward.json or reward.txt)."""

    @property
    def passed(self) -> bool:
        return self.value >= PASSING_REWARD


def read_reward(folder: Path) -> Reward:
    """The reward in the verifier's log folder `folder`; raises RewardError."""
    for name in (REWARD_JSON, REWARD_TEXT):
        data = _read(folder / name, _CAP)
        if data is None:
            continue
        text = data.decode("utf-8", errors="replace").strip()
        if not text:
            raise RewardError(f"tests/test.sh left /logs/verifier/{name} empty")
        if name == REWARD_JSON:
            return Reward(_from_json(text), name)
        try:
            value = float(text)
        except ValueError:
            raise RewardError(f"/logs/verifier/{name} holds {text[:80]!r}, not a number") from None
        if not math.isfinite(value):
            raise RewardError(f"/logs/verifier/{name} holds {value}, not a finite number")
        return Reward(value, name)
    raise RewardError(
        f"tests/test.sh wrote no reward (/logs/verifier/{REWARD_TEXT} or {REWARD_JSON})"
    )


def _from_json(text: str) -> float:
    try:
        found = json.loads(text)
    except ValueError:
        raise RewardError(f"/logs/verifier/{REWARD_JSON} is not JSON: {text[:80]!r}") from None
    values = found if isinstance(found, dict) else {"reward": found}
    numbers = {}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RewardError(f"/logs/verifier/{REWARD_JSON}: {name} = {value!r} is no number")
        if not math.isfinite(value):
            raise RewardError(f"/logs/verifier/{REWARD_JSON}: {name} = {value} is not finite")
        numbers[str(name)] = float(value)
    if not numbers:
        raise RewardError(f"/logs/verifier/{REWARD_JSON} names no reward")
    return numbers["reward"] if "reward" in numbers else min(numbers.values())


def reward_verdict(folder: Path, *, timed_out: float | None, network: bool) -> Verdict:
    """The verdict on a test.sh run whose log folder is `folder`: `timed_out` is its
    time limit when it did not finish, `network` whether the container had one (said
    when no reward came, since TB2's scripts often download their test tools)."""
    evidence: list[str] = []
    try:
        output = output_tail(folder)
    except ForeignFile as exc:  # never read, never raised: evidence
        output = ""
        evidence.append(f"{exc}: test.sh's output was not read")
    if timed_out is not None:
        return Verdict(
            passed=False,
            output=output,
            reason=f"tests/test.sh did not finish within {timed_out:g} s",
            tamper=evidence,
        )
    hint = (
        ""
        if network or not network_failed(output)
        else " (the container had no network: a test.sh that installs its tools needs "
        '[environment] network_mode = "public" or allow_internet = true in task.toml)'
    )
    try:
        reward = read_reward(folder)
    except ForeignFile as exc:  # put there in place of test.sh's: the deliverable's FAIL
        swapped = f"{exc}: the reward was not read"
        return Verdict(passed=False, output=output, reason=swapped, tamper=[*evidence, swapped])
    except RewardError as exc:
        if (line := failed_setup(output)) is not None:
            failure = _setup(line, hint)
            return Verdict(passed=False, output=output, setup_failure=failure, tamper=evidence)
        return Verdict(passed=False, output=output, error=f"{exc}{hint}", tamper=evidence)
    if not reward.passed and (line := failed_setup(output)) is not None:
        failure = _setup(line, hint)
        return Verdict(
            passed=False, output=output, setup_failure=failure, reward=reward.value, tamper=evidence
        )
    reason = None
    if not reward.passed and reward.value != 0:
        reason = f"reward {reward.value:g} (a pass needs {PASSING_REWARD:g})"
    passed = reward.passed and not evidence  # a PASS whose output was swapped is no PASS
    if reward.passed and evidence:
        reason = "the reward file says pass, but test.sh's output file was replaced"
    return Verdict(
        passed=passed, output=output, reason=reason, reward=reward.value, tamper=evidence
    )


def _setup(line: str, hint: str) -> str:
    return f"tests/test.sh's own set-up failed before its tests ran: {line!r}{hint}"


def output_tail(folder: Path) -> str:
    """The end of test.sh's output, as the verdict keeps it ("" when there is none)."""
    data = _read(folder / TEST_OUTPUT, OUTPUT_TAIL * 4, tail=True)
    return (data or b"").decode("utf-8", errors="replace")[-OUTPUT_TAIL:]


def _read(path: Path, cap: int, *, tail: bool = False) -> bytes | None:
    """At most `cap` bytes of the regular file `path` (its end with `tail`), None when
    it does not exist. A symbolic link is never followed: the folder is written from
    inside the container, and a link there could point at any file of this machine."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ForeignFile(f"/logs/verifier/{path.name} is a symbolic link") from None
        raise RewardError(f"cannot read /logs/verifier/{path.name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ForeignFile(f"/logs/verifier/{path.name} is not a regular file")
        if tail and info.st_size > cap:
            os.lseek(fd, info.st_size - cap, os.SEEK_SET)
        return os.read(fd, cap)
    finally:
        os.close(fd)
