"""Verifier of the active-emails task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_active_emails_sorted() -> None:
    path = WORKDIR / "active_emails.txt"
    assert path.is_file(), "active_emails.txt was not created"
    assert path.read_text().split() == [
        "Fatima@example.com",
        "aaron.hana@example.com",
        "ada@example.com",
        "chen@example.org",
    ]
