#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
from pathlib import Path
path = Path("slugs.py")
text = path.read_text()
text = text.replace('re.sub(r"[^a-z0-9]", "-", text)', 're.sub(r"[^a-z0-9]+", "-", text.lower())')
text = text.replace("text = text[: max_length + 1]", 'text = text[:max_length].rstrip("-")')
path.write_text(text)
PY
python3 -m unittest -q test_slugs
