"""Verifier of the sqlite-normalize task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

WORKDIR = Path(os.environ["TASK_WORKDIR"])
EXPECTED = [
    [1001, "ada@example.com", "Ada Lovelace", "Widget", 2.5, 4],
    [1002, "brian@example.com", "Brian Kernighan", "Gadget", 10.0, 1],
    [1003, "ada@example.com", "Ada Lovelace", "Gadget", 10.0, 2],
    [1004, "chen@example.org", "Chen Wei", "Widget", 2.5, 10],
    [1005, "brian@example.com", "Brian Kernighan", "Doohickey", 7.25, 3],
    [1006, "dana@example.net", "Dana Scully", "Widget", 2.5, 1],
    [1007, "chen@example.org", "Chen Wei", "Doohickey", 7.25, 1],
]
COLUMNS = {
    "customers": {"id": "INTEGER", "email": "TEXT", "name": "TEXT"},
    "products": {"id": "INTEGER", "name": "TEXT", "unit_price": "REAL"},
    "orders": {
        "id": "INTEGER",
        "customer_id": "INTEGER",
        "product_id": "INTEGER",
        "quantity": "INTEGER",
    },
}


def connect() -> sqlite3.Connection:
    path = WORKDIR / "store.db"
    assert path.is_file(), "store.db was not created"
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


@pytest.mark.parametrize("table", sorted(COLUMNS))
def test_schema(table: str) -> None:
    info = connect().execute(f"PRAGMA table_info({table})").fetchall()
    assert {row[1]: row[2].upper() for row in info} == COLUMNS[table]
    assert [row[1] for row in info if row[5]] == ["id"], "id must be the primary key"
    assert all(row[3] for row in info if row[1] != "id"), "columns must be NOT NULL"


def test_unique_columns() -> None:
    db = connect()
    for table, column in [("customers", "email"), ("products", "name")]:
        unique = [
            [r[2] for r in db.execute(f"PRAGMA index_info('{index[1]}')")]
            for index in db.execute(f"PRAGMA index_list({table})")
            if index[2]
        ]
        assert [column] in unique, f"{table}.{column} is not UNIQUE"


def test_foreign_keys() -> None:
    db = connect()
    keys = {(r[2], r[3], r[4]) for r in db.execute("PRAGMA foreign_key_list(orders)")}
    assert keys == {("customers", "customer_id", "id"), ("products", "product_id", "id")}
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_rows() -> None:
    db = connect()
    assert db.execute("SELECT COUNT(*) FROM customers").fetchone() == (4,)
    assert db.execute("SELECT COUNT(*) FROM products").fetchone() == (3,)
    rows = db.execute(
        """
        SELECT o.id, c.email, c.name, p.name, p.unit_price, o.quantity
        FROM orders o JOIN customers c ON c.id = o.customer_id
        JOIN products p ON p.id = o.product_id ORDER BY o.id
        """
    ).fetchall()
    assert [list(row) for row in rows] == EXPECTED
