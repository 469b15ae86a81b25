#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
from pathlib import Path
path = Path("invoice.py")
text = path.read_text()
fixes = [
    ('if not row or row.startswith("#"):', 'if not row.strip() or row.lstrip().startswith("#"):'),
    ("return (line.quantity * line.unit_price).quantize(CENT)",
     "return (line.quantity * line.unit_price).quantize(CENT, ROUND_HALF_UP)"),
    ('if subtotal > Decimal("500"):', 'if subtotal >= Decimal("500"):'),
]
for old, new in fixes:
    assert old in text, old
    text = text.replace(old, new)
path.write_text(text)
PY
python3 -m unittest -q test_invoice
