"""Verifier of the git-first-commit task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PROJECT = Path(os.environ["TASK_WORKDIR"]) / "project"


def git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(PROJECT), *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_is_its_own_repository() -> None:
    assert (PROJECT / ".git").is_dir(), "project/ is not a git repository"
    assert Path(git("rev-parse", "--show-toplevel")).resolve() == PROJECT.resolve()


def test_one_commit_with_every_file() -> None:
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("rev-list", "--count", "main") == "1"
    assert git("log", "-1", "--format=%s", "main") == "Initial commit"
    files = sorted(git("ls-tree", "-r", "--name-only", "main").split("\n"))
    assert files == ["README.md", "docs/notes.txt", "src/app.sh", "src/util.sh"]


def test_working_tree_is_clean() -> None:
    assert git("status", "--porcelain") == ""
