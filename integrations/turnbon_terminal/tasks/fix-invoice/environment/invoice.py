"""Invoices from order lines: parsing, totals, discounts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


@dataclass(frozen=True)
class Line:
    sku: str
    quantity: int
    unit_price: Decimal


def parse_line(text: str) -> Line:
    """Parses `SKU;QUANTITY;UNIT_PRICE` (e.g. `AB-1;3;19.99`); spaces around fields
    are ignored."""
    sku, quantity, price = (part.strip() for part in text.split(";"))
    return Line(sku, int(quantity), Decimal(price))


def parse_invoice(text: str) -> list[Line]:
    """One line per row; rows that are empty or hold only spaces, and comment rows
    (whose first character other than a space is `#`), are skipped."""
    lines = []
    for row in text.splitlines():
        if not row or row.startswith("#"):
            continue
        lines.append(parse_line(row))
    return lines


def line_total(line: Line) -> Decimal:
    """quantity x unit price, rounded to cents with halves rounded up (0.125 -> 0.13)."""
    return (line.quantity * line.unit_price).quantize(CENT)


def discount_rate(subtotal: Decimal) -> Decimal:
    """0 below 100.00; 5% from 100.00 (included); 10% from 500.00 (included)."""
    if subtotal > Decimal("500"):
        return Decimal("0.10")
    if subtotal >= Decimal("100"):
        return Decimal("0.05")
    return Decimal("0")


def invoice_total(lines: list[Line]) -> Decimal:
    """The sum of the line totals less the discount on that sum, the discount rounded
    to cents with halves rounded up."""
    subtotal = sum((line_total(line) for line in lines), Decimal("0"))
    discount = (subtotal * discount_rate(subtotal)).quantize(CENT, ROUND_HALF_UP)
    return subtotal - discount
