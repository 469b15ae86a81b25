#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import json
users = json.load(open("users.json"))
emails = sorted(u["email"] for u in users if u.get("active") is True)
open("active_emails.txt", "w").write("".join(e + "\n" for e in emails))
PY
