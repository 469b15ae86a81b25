"""Verifier of the greet-script task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

WORKDIR = Path(os.environ["TASK_WORKDIR"])
SCRIPT = WORKDIR / "greet.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=10, cwd=WORKDIR
    )


def test_script_is_executable() -> None:
    assert SCRIPT.is_file(), "greet.sh was not created"
    assert os.access(SCRIPT, os.X_OK), "greet.sh is not executable"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "Hello, world!\n"),
        (("Ada",), "Hello, Ada!\n"),
        (("Ada Lovelace",), "Hello, Ada Lovelace!\n"),
    ],
)
def test_greets(args: tuple[str, ...], expected: str) -> None:
    result = run(*args)
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")


def test_too_many_arguments() -> None:
    result = run("Ada", "Grace")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == "usage: greet.sh [NAME]"
