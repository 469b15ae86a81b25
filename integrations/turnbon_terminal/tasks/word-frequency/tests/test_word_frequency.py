"""Verifier of the word-frequency task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_top_five_words() -> None:
    path = WORKDIR / "top5.txt"
    assert path.is_file(), "top5.txt was not created"
    assert path.read_text().strip().split("\n") == ["the 19", "keeper 5", "sea 5", "was 5", "a 4"]
