#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import csv
from decimal import Decimal
with open("sales.csv", newline="") as f:
    total = sum(Decimal(r["amount"]) for r in csv.DictReader(f) if r["region"] == "north")
open("north_total.txt", "w").write(f"{total:.2f}\n")
PY
