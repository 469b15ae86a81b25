"""Verifier of the sqlite-add-email task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def connect() -> sqlite3.Connection:
    return sqlite3.connect(f"file:{WORKDIR / 'app.db'}?mode=ro", uri=True)


def test_email_column() -> None:
    columns = {row[1]: row[2].upper() for row in connect().execute("PRAGMA table_info(users)")}
    assert columns.get("email") == "TEXT"


def test_rows() -> None:
    rows = (
        connect().execute("SELECT id, username, created, email FROM users ORDER BY id").fetchall()
    )
    assert rows == [
        (1, "ada", "2023-01-05", "ada@example.com"),
        (2, "brian", "2023-02-11", None),
        (3, "chen", "2023-02-12", "chen@example.org"),
        (5, "dana", "2023-03-01", None),
        (7, "emeka", "2023-04-20", "emeka@example.com"),
    ]


def test_unique_index() -> None:
    db = connect()
    indexes = {row[1]: row[2] for row in db.execute("PRAGMA index_list(users)")}
    assert indexes.get("idx_users_email") == 1, "no unique index idx_users_email"
    columns = [row[2] for row in db.execute("PRAGMA index_info(idx_users_email)")]
    assert columns == ["email"]
