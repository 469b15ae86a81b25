"""Verifier of the git-find-regression task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

WORKDIR = Path(os.environ["TASK_WORKDIR"])
REPO = WORKDIR / "calc"


def git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def passes(commit: str) -> bool:
    """check_calc.py's test, on calc.py as of `commit`."""
    calc: dict[str, Any] = {}
    exec(git("show", f"{commit}:calc.py"), calc)
    ok = calc["add"](2, 3) == 5 and calc["sub"](5, 3) == 2 and calc["mul"](3, 4) == 12
    return bool(ok and calc["mean"]([1, 2]) == 1.5 and calc["mean"]([4]) == 4)


def test_first_bad_commit() -> None:
    commits = git("rev-list", "--reverse", "main").split()
    first_bad = next(c for c in commits if not passes(c))
    path = WORKDIR / "first_bad.txt"
    assert path.is_file(), "first_bad.txt was not created"
    assert path.read_text().strip() == first_bad


def test_repository_left_as_found() -> None:
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("log", "-1", "--format=%s", "main") == "Add changelog"
    assert git("rev-list", "--count", "main") == "12"
    assert git("status", "--porcelain") == ""
