"""Verifier of the git-restore-file task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SITE = Path(os.environ["TASK_WORKDIR"]) / "site"
V1 = "[server]\nport = 8080\nhost = example.org\n"


def git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(SITE), *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_restore_commit() -> None:
    assert git("symbolic-ref", "--short", "HEAD").strip() == "main"
    subjects = git("log", "--format=%s", "main").strip().split("\n")
    assert subjects == [
        "Restore settings.ini",
        "Remove legacy settings",
        "Change port",
        "Add settings",
    ]
    assert git("show", "main:settings.ini") == V1
    changed = git("show", "--name-only", "--format=", "main").split()
    assert changed == ["settings.ini"]


def test_tag_and_tree() -> None:
    assert git("log", "-1", "--format=%s", "v1.0").strip() == "Add settings"
    assert (SITE / "settings.ini").read_text() == V1
    assert git("status", "--porcelain") == ""
