"""Verifier of the access-log-stats task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import json
import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_status_counts() -> None:
    path = WORKDIR / "status_counts.json"
    assert path.is_file(), "status_counts.json was not created"
    assert json.loads(path.read_text()) == {"200": 13, "201": 4, "304": 5, "404": 6, "500": 3}


def test_top_ips() -> None:
    path = WORKDIR / "top_ips.txt"
    assert path.is_file(), "top_ips.txt was not created"
    assert path.read_text().strip().split("\n") == ["10.0.0.5 9", "192.168.1.20 7", "10.0.0.12 5"]
