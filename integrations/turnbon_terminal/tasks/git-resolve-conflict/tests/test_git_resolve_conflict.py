"""Verifier of the git-resolve-conflict task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

APP = Path(os.environ["TASK_WORKDIR"]) / "app"
SETTINGS = "name = demo\ntimeout = 30\nretries = 3\nlog = info\n"


def git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(APP), *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_merge_concluded() -> None:
    assert not (APP / ".git" / "MERGE_HEAD").exists(), "the merge is still in progress"
    assert git("symbolic-ref", "--short", "HEAD").strip() == "main"
    parents = git("log", "-1", "--format=%P", "main").split()
    assert len(parents) == 2, "the tip of main is not a merge commit"
    assert git("log", "-1", "--format=%s", parents[0]).strip() == "Tune retries"
    assert parents[1] == git("rev-parse", "upstream").strip()


def test_resolution() -> None:
    assert git("show", "main:settings.conf") == SETTINGS
    assert git("show", "main:NOTES.txt") == "Upstream raised the timeout.\n"
    assert git("status", "--porcelain") == ""
