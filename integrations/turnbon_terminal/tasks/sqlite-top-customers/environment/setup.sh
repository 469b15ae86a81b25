#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("shop.db")
db.executescript('''
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount_cents INTEGER, status TEXT);
''')
db.executemany("INSERT INTO customers VALUES (?, ?)", [
    (1, "Ada"), (2, "Brian"), (3, "Chen"), (4, "Dana"), (5, "Emeka"), (6, "Fatima")])
db.executemany("INSERT INTO orders(customer_id, amount_cents, status) VALUES (?, ?, ?)", [
    (1, 12050, "paid"), (1, 3000, "paid"), (1, 99999, "refunded"),
    (2, 20000, "paid"), (2, 500, "pending"),
    (3, 4599, "paid"), (3, 4599, "paid"), (3, 4599, "paid"),
    (4, 100000, "pending"), (4, 1000, "paid"),
    (5, 30000, "refunded"),
    (6, 15000, "paid"), (6, 1, "paid")])
db.commit()
PY
