"""Verifier of the sessionize-events task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])
EXPECTED = [
    "user,start,end,events",
    "u1,2024-03-01T09:57:00Z,2024-03-01T09:57:00Z,1",
    "u1,2024-03-01T10:57:00Z,2024-03-01T10:57:00Z,1",
    "u1,2024-03-01T12:57:00Z,2024-03-01T13:17:00Z,2",
    "u1,2024-03-01T15:17:00Z,2024-03-01T15:22:00Z,2",
    "u1,2024-03-01T16:22:00Z,2024-03-01T16:27:00Z,2",
    "u1,2024-03-01T18:27:00Z,2024-03-01T18:27:00Z,2",
    "u1,2024-03-01T18:57:01Z,2024-03-01T19:03:01Z,4",
    "u10,2024-03-01T10:39:00Z,2024-03-01T12:01:00Z,8",
    "u10,2024-03-01T13:01:00Z,2024-03-01T13:01:00Z,1",
    "u10,2024-03-01T15:01:00Z,2024-03-01T15:01:00Z,1",
    "u10,2024-03-01T16:01:00Z,2024-03-01T16:26:00Z,3",
    "u2,2024-03-01T09:24:00Z,2024-03-01T11:35:00Z,9",
    "u3,2024-03-01T10:59:00Z,2024-03-01T12:22:00Z,7",
    "u3,2024-03-01T12:52:01Z,2024-03-01T13:12:01Z,4",
    "u3,2024-03-01T14:12:01Z,2024-03-01T14:12:01Z,1",
    "u3,2024-03-01T14:42:02Z,2024-03-01T14:43:02Z,2",
]


def test_sessions() -> None:
    path = WORKDIR / "sessions.csv"
    assert path.is_file(), "sessions.csv was not created"
    assert path.read_text().strip().splitlines() == EXPECTED
