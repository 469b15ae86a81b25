"""Verifier of the sqlite-top-customers task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_top_customers() -> None:
    path = WORKDIR / "top_customers.csv"
    assert path.is_file(), "top_customers.csv was not created"
    lines = path.read_text().strip().splitlines()
    assert lines == ["name,total", "Brian,200.00", "Ada,150.50", "Fatima,150.01"]
