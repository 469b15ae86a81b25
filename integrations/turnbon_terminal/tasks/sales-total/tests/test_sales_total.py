"""Verifier of the sales-total task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_north_total() -> None:
    path = WORKDIR / "north_total.txt"
    assert path.is_file(), "north_total.txt was not created"
    assert path.read_text().strip() == "1120.74"
