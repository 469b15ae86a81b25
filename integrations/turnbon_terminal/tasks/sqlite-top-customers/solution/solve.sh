#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("shop.db")
rows = db.execute('''
    SELECT c.name, SUM(o.amount_cents) AS total FROM orders o JOIN customers c ON c.id = o.customer_id
    WHERE o.status = 'paid' GROUP BY c.id ORDER BY total DESC LIMIT 3''').fetchall()
with open("top_customers.csv", "w") as f:
    f.write("name,total\n")
    for name, cents in rows:
        f.write(f"{name},{cents // 100}.{cents % 100:02d}\n")
PY
