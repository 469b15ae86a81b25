#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("app.db")
db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE, created TEXT)")
db.executemany("INSERT INTO users VALUES (?, ?, ?)", [
    (1, "ada", "2023-01-05"), (2, "brian", "2023-02-11"), (3, "chen", "2023-02-12"),
    (5, "dana", "2023-03-01"), (7, "emeka", "2023-04-20")])
db.commit()
PY
