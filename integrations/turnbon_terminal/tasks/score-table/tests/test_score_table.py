"""Verifier of the score-table task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])
EXPECTED = [
    "Name         Total  Average",
    "---------------------------",
    "Ada            271    90.33",
    "Chen           271    90.33",
    "Emeka          271    90.33",
    "Fatima         271    90.33",
    "Brian          241    80.33",
    "Dana           201    67.00",
]


def test_table_is_exact() -> None:
    path = WORKDIR / "table.txt"
    assert path.is_file(), "table.txt was not created"
    assert path.read_text() == "".join(line + "\n" for line in EXPECTED)
