"""Verifier of the log-line-counts task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_report_lists_each_log_and_the_total() -> None:
    report = WORKDIR / "report.txt"
    assert report.is_file(), "report.txt was not created"
    lines = report.read_text().rstrip("\n").split("\n")
    assert lines == ["Auth.log 7", "app.log 12", "db.log 5", "empty.log 0", "total 24"]


def test_logs_are_untouched() -> None:
    assert (WORKDIR / "logs" / "db.log").read_text().endswith("without newline")
    assert (WORKDIR / "logs" / "archive" / "old.log").is_file()
