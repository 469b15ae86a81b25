"""Verifier of the csv-to-json task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

WORKDIR = Path(os.environ["TASK_WORKDIR"])
EXPECTED = [
    {"sku": "A-099", "name": "Nut", "qty": 1000, "price": 0.05},
    {"sku": "A-100", "name": "Bolt, large", "qty": 120, "price": 0.15},
    {"sku": "B-200", "name": "Widget", "qty": 5, "price": 2.5},
    {"sku": "C-300", "name": "Gear", "qty": 0, "price": 12.0},
]


def test_inventory_json() -> None:
    path = WORKDIR / "inventory.json"
    assert path.is_file(), "inventory.json was not created"
    found = json.loads(path.read_text())
    assert isinstance(found, list) and len(found) == len(EXPECTED)
    for got, want in zip(found, EXPECTED, strict=True):
        assert set(got) == {"sku", "name", "qty", "price"}
        assert got["sku"] == want["sku"] and got["name"] == want["name"]
        assert type(got["qty"]) is int and got["qty"] == want["qty"]
        assert type(got["price"]) in (int, float)
        assert got["price"] == pytest.approx(want["price"])
