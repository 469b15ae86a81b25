#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import csv
with open("scores.csv", newline="") as f:
    rows = [(r["name"], int(r["math"]) + int(r["physics"]) + int(r["chemistry"])) for r in csv.DictReader(f)]
rows.sort(key=lambda r: (-r[1], r[0]))
with open("table.txt", "w") as out:
    out.write(f"{'Name':<12}{'Total':>6}{'Average':>9}\n" + "-" * 27 + "\n")
    for name, total in rows:
        out.write(f"{name:<12}{total:>6}{total / 3:>9.2f}\n")
PY
