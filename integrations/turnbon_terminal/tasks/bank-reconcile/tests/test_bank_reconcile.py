"""Verifier of the bank-reconcile task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import json
import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_reconciliation() -> None:
    path = WORKDIR / "reconcile.json"
    assert path.is_file(), "reconcile.json was not created"
    assert json.loads(path.read_text()) == {
        "missing_in_ledger": ["T004"],
        "missing_in_bank": ["T005", "T008"],
        "mismatched": [
            {"id": "T003", "bank": "15.00", "ledger": "15.01"},
            {"id": "T009", "bank": "-1000.01", "ledger": "-1000.10"},
        ],
    }
