"""Verifier of the fix-invoice task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("invoice_under_test", WORKDIR / "invoice.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_shipped_tests_unchanged_and_passing() -> None:
    shipped = (WORKDIR / "test_invoice.py").read_bytes()
    assert (
        hashlib.sha256(shipped).hexdigest()
        == "f0ee0c38337b9d360d6c58281bfcb9bd87a523e6591800d9658c8d4bca0fbc75"
    ), "test_invoice.py was changed"
    result = subprocess.run(
        [sys.executable, "-m", "unittest", "-q", "test_invoice"],
        cwd=WORKDIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_parse_invoice() -> None:
    invoice = load()
    rows = "\n\t\n  #c\nA;1;1.10\n\n#x;1;2\n B ; 2 ; 0.5 \n"
    parsed = invoice.parse_invoice(rows)
    assert [(r.sku, r.quantity, r.unit_price) for r in parsed] == [
        ("A", 1, Decimal("1.10")),
        ("B", 2, Decimal("0.5")),
    ]


@pytest.mark.parametrize(
    ("quantity", "price", "expected"),
    [(1, "0.005", "0.01"), (3, "0.335", "1.01"), (2, "0.0125", "0.03"), (7, "1.99", "13.93")],
)
def test_line_total(quantity: int, price: str, expected: str) -> None:
    invoice = load()
    assert invoice.line_total(invoice.Line("X", quantity, Decimal(price))) == Decimal(expected)


@pytest.mark.parametrize(
    ("subtotal", "rate"),
    [
        ("0", "0"),
        ("99.99", "0"),
        ("100", "0.05"),
        ("499.99", "0.05"),
        ("500", "0.10"),
        ("900", "0.10"),
    ],
)
def test_discount_rate(subtotal: str, rate: str) -> None:
    assert load().discount_rate(Decimal(subtotal)) == Decimal(rate)


def test_invoice_total() -> None:
    invoice = load()
    lines = [invoice.Line("A", 1, Decimal("100.005")), invoice.Line("B", 3, Decimal("133.33"))]
    # line totals 100.01 + 399.99 = 500.00; 10% off
    assert invoice.invoice_total(lines) == Decimal("450.00")
    assert invoice.invoice_total([invoice.Line("C", 1, Decimal("110.10"))]) == Decimal("104.59")
