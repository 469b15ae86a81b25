#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import csv, json
from decimal import Decimal
with open("bank.csv", newline="") as f:
    bank = {r["id"]: Decimal(r["amount"].replace(",", "")) for r in csv.DictReader(f)}
with open("ledger.csv", newline="") as f:
    ledger = {r["txn_id"]: Decimal(r["value"].replace(",", ".")) for r in csv.DictReader(f, delimiter=";")}
result = {
    "missing_in_ledger": sorted(bank.keys() - ledger.keys()),
    "missing_in_bank": sorted(ledger.keys() - bank.keys()),
    "mismatched": [
        {"id": i, "bank": f"{bank[i]:.2f}", "ledger": f"{ledger[i]:.2f}"}
        for i in sorted(bank.keys() & ledger.keys()) if bank[i] != ledger[i]
    ],
}
json.dump(result, open("reconcile.json", "w"), indent=2)
PY
