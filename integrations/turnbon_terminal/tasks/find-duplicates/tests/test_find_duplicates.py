"""Verifier of the find-duplicates task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_duplicate_groups() -> None:
    path = WORKDIR / "duplicates.txt"
    assert path.is_file(), "duplicates.txt was not created"
    assert path.read_text().strip().split("\n") == [
        "files/a.txt files/sub/a-copy.txt files/z/last.txt",
        "files/b.bin files/sub/deeper/b2.bin",
        "files/empty1 files/sub/empty2",
    ]
