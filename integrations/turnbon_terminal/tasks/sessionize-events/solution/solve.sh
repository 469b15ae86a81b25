#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import json
from datetime import datetime, timedelta
by_user = {}
for line in open("events.jsonl"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if isinstance(e, dict) and isinstance(e.get("user"), str) and isinstance(e.get("ts"), str):
        by_user.setdefault(e["user"], []).append(e["ts"])
def at(ts):
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")
rows = []
for user, stamps in by_user.items():
    stamps.sort()
    first = last = stamps[0]
    count = 1
    for ts in stamps[1:]:
        if at(ts) - at(last) <= timedelta(minutes=30):
            last, count = ts, count + 1
        else:
            rows.append((user, first, last, count))
            first = last = ts
            count = 1
    rows.append((user, first, last, count))
with open("sessions.csv", "w") as f:
    f.write("user,start,end,events\n")
    for row in sorted(rows):
        f.write(",".join(map(str, row)) + "\n")
PY
