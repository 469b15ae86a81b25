"""Verifier of the largest-file task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_largest_file_path() -> None:
    path = WORKDIR / "largest.txt"
    assert path.is_file(), "largest.txt was not created"
    assert path.read_text().strip() == "data/.archive/dump.bin"
