#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import csv, sqlite3
db = sqlite3.connect("store.db")
db.executescript('''
CREATE TABLE customers(id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT NOT NULL);
CREATE TABLE products(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, unit_price REAL NOT NULL);
CREATE TABLE orders(id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL);
''')
with open("orders.csv", newline="") as f:
    for r in csv.DictReader(f):
        db.execute("INSERT OR IGNORE INTO customers(email, name) VALUES (?, ?)", (r["customer_email"], r["customer_name"]))
        db.execute("INSERT OR IGNORE INTO products(name, unit_price) VALUES (?, ?)", (r["product"], float(r["unit_price"])))
        db.execute(
            "INSERT INTO orders VALUES (?, (SELECT id FROM customers WHERE email = ?), (SELECT id FROM products WHERE name = ?), ?)",
            (int(r["order_id"]), r["customer_email"], r["product"], int(r["quantity"])))
db.commit()
PY
