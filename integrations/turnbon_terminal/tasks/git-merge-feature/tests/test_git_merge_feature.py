"""Verifier of the git-merge-feature task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(os.environ["TASK_WORKDIR"]) / "repo"


def git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_merge_commit_on_main() -> None:
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    parents = git("log", "-1", "--format=%P", "main").split()
    assert len(parents) == 2, "the tip of main is not a merge commit"
    assert git("log", "-1", "--format=%s", parents[0]) == "Update config"
    assert parents[1] == git("rev-parse", "feature")
    assert git("log", "-1", "--format=%s", "feature") == "Extend feature"
    assert git("rev-list", "--count", "main") == "5"


def test_merged_files() -> None:
    assert git("show", "main:feature.txt") == "feature flag\nmore feature"
    assert git("show", "main:config.txt") == "timeout=30"
    assert git("show", "main:app.txt") == "app v1"


def test_clean() -> None:
    assert git("status", "--porcelain") == ""
