"""Verifier of the todo-cli task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def todo(cwd: Path, *args: str) -> tuple[int, str, str]:
    script = WORKDIR / "todo.py"
    assert script.is_file(), "todo.py was not created"
    result = subprocess.run(
        [sys.executable, str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=30
    )
    return result.returncode, result.stdout, result.stderr


def test_add_list_done_remove(tmp_path: Path) -> None:
    assert todo(tmp_path, "list") == (0, "", "")
    assert todo(tmp_path, "add", "buy", "milk") == (0, "added 1\n", "")
    assert todo(tmp_path, "add", "write  report") == (0, "added 2\n", "")
    assert todo(tmp_path, "add", "call", "Ada") == (0, "added 3\n", "")
    assert (tmp_path / "todo.json").is_file()
    assert todo(tmp_path, "done", "2") == (0, "done 2\n", "")
    assert todo(tmp_path, "list") == (
        0,
        "1 [ ] buy milk\n2 [x] write  report\n3 [ ] call Ada\n",
        "",
    )
    assert todo(tmp_path, "remove", "3") == (0, "removed 3\n", "")
    assert todo(tmp_path, "add", "again") == (0, "added 4\n", "")
    assert todo(tmp_path, "list") == (0, "1 [ ] buy milk\n2 [x] write  report\n4 [ ] again\n", "")


def test_unknown_ids(tmp_path: Path) -> None:
    todo(tmp_path, "add", "one")
    for args in [("done", "7"), ("remove", "3"), ("done", "x")]:
        code, out, err = todo(tmp_path, *args)
        assert (code, out, err.strip()) == (1, "", f"no such item: {args[1]}")
    assert todo(tmp_path, "list") == (0, "1 [ ] one\n", "")


@pytest.mark.parametrize(
    "args", [(), ("frobnicate",), ("add",), ("done",), ("remove", "1", "2"), ("list", "x")]
)
def test_usage_errors(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, out, err = todo(tmp_path, *args)
    assert code == 2 and out == "" and err.strip()
