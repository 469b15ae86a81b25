#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import csv, json
rows = []
with open("inventory.csv", newline="") as f:
    for r in csv.DictReader(f):
        r = {k.strip(): v.strip() for k, v in r.items()}
        if r["sku"]:
            rows.append({"sku": r["sku"], "name": r["name"], "qty": int(r["qty"]), "price": float(r["price"])})
json.dump(sorted(rows, key=lambda r: r["sku"]), open("inventory.json", "w"), indent=2)
PY
