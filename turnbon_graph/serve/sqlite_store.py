"""A response store in a SQLite file (`turnbon serve --response-store PATH`), which every
`--workers` process (and any other server given the same file) shares, so that a chain
continues whichever process answers its next request.

One connection per process, used by one thread at a time (the store's methods run on
`asyncio.to_thread`); the file is in WAL mode, so that readers do not wait for a writer,
and a write waits up to `BUSY_TIMEOUT_S` for another process's to finish.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from turnbon_graph.errors import ConfigurationError
from turnbon_graph.serve.store import Encoded, ResponseStore, StoredResponse

__all__ = ["SqliteStore"]

BUSY_TIMEOUT_S = 30.0
ITEMS_A_QUERY = 500
"""Item ids looked up by one query (SQLite bounds the parameters of a statement)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    size INTEGER NOT NULL,
    response TEXT NOT NULL,
    input TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY,
    response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
    item TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS items_of_response ON items (response_id);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (created);
CREATE TABLE IF NOT EXISTS total (one INTEGER PRIMARY KEY CHECK (one = 1), size INTEGER);
INSERT OR IGNORE INTO total SELECT 1, COALESCE(SUM(size), 0) FROM responses;
CREATE TRIGGER IF NOT EXISTS counted_in AFTER INSERT ON responses
    BEGIN UPDATE total SET size = size + NEW.size; END;
CREATE TRIGGER IF NOT EXISTS counted_out AFTER DELETE ON responses
    BEGIN UPDATE total SET size = size - OLD.size; END;
"""
"""`total` keeps the responses' size as they come and go, so that a write need not add
them all up to know whether the oldest must go."""


class SqliteStore(ResponseStore):
    """Responses in the SQLite file at `path` (made if missing, readable by this user
    only; its folder must exist)."""

    def __init__(self, path: Path, *, max_bytes: int, max_age_s: float) -> None:
        super().__init__(max_bytes=max_bytes, max_age_s=max_age_s)
        self.path = path
        self._lock = threading.Lock()
        try:
            # conversations as clients sent them: only the server's user reads a new file
            # (SQLite gives its -wal and -shm files the same mode)
            os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
            self._db = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise ConfigurationError(
                f"the response store {path} cannot be opened as a SQLite file ({exc}): give "
                "--response-store a new file's path, or one this server made"
            ) from None

    def write(self, encoded: Encoded, created: float) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # waits for another process's write
            try:
                self._db.execute("DELETE FROM responses WHERE created < ?", (self.oldest_kept(),))
                self._db.execute("DELETE FROM responses WHERE id = ?", (encoded.id,))
                self._db.execute(
                    "INSERT INTO responses (id, created, size, response, input) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (encoded.id, created, encoded.size, encoded.response, encoded.input),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO items (id, response_id, item) VALUES (?, ?, ?)",
                    [(item_id, encoded.id, item) for item_id, item in encoded.items.items()],
                )
                while self._db.execute("SELECT size FROM total").fetchone()[0] > self.max_bytes:
                    self._db.execute(
                        "DELETE FROM responses WHERE seq = (SELECT MIN(seq) FROM responses)"
                    )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def read(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            row = self._db.execute(
                "SELECT response, input FROM responses WHERE id = ? AND created >= ?",
                (response_id, self.oldest_kept()),
            ).fetchone()
        return None if row is None else Encoded.decode(row[0], row[1])

    def read_items(self, item_ids: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(item_ids), ITEMS_A_QUERY):
            batch = item_ids[start : start + ITEMS_A_QUERY]
            marks = ", ".join("?" * len(batch))
            with self._lock:
                rows = self._db.execute(
                    "SELECT items.id, items.item FROM items JOIN responses "
                    f"ON responses.id = items.response_id WHERE items.id IN ({marks}) "
                    "AND responses.created >= ?",
                    (*batch, self.oldest_kept()),
                ).fetchall()
            found.update((str(item_id), str(item)) for item_id, item in rows)
        return found

    def remove(self, response_id: str) -> bool:
        with self._lock:
            gone = self._db.execute("DELETE FROM responses WHERE id = ?", (response_id,))
        return gone.rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
