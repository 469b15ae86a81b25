#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import csv, sqlite3
db = sqlite3.connect("app.db")
db.execute("ALTER TABLE users ADD COLUMN email TEXT")
with open("emails.csv", newline="") as f:
    for row in csv.DictReader(f):
        db.execute("UPDATE users SET email = ? WHERE username = ?", (row["email"], row["username"]))
db.execute("CREATE UNIQUE INDEX idx_users_email ON users(email)")
db.commit()
PY
