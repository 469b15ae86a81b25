#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import json
def merge(base, over):
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(out[key], value) if key in out else value
        return out
    return over
merged = merge(json.load(open("defaults.json")), json.load(open("overrides.json")))
json.dump(merged, open("config.json", "w"), indent=2)
PY
