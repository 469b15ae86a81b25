"""Tests of invoice (run: python3 -m unittest test_invoice)."""

from __future__ import annotations

import unittest
from decimal import Decimal

from invoice import Line, discount_rate, invoice_total, line_total, parse_invoice


class InvoiceTest(unittest.TestCase):
    def test_parse_skips_blank_and_comment_rows(self) -> None:
        text = "# header\nAB-1; 3 ;19.99\n   \n   # note\nCD-2;1;5\n"
        self.assertEqual(
            parse_invoice(text),
            [Line("AB-1", 3, Decimal("19.99")), Line("CD-2", 1, Decimal("5"))],
        )

    def test_line_total_rounds_halves_up(self) -> None:
        self.assertEqual(line_total(Line("X", 1, Decimal("0.125"))), Decimal("0.13"))

    def test_discount_boundaries(self) -> None:
        self.assertEqual(discount_rate(Decimal("99.99")), Decimal("0"))
        self.assertEqual(discount_rate(Decimal("100.00")), Decimal("0.05"))
        self.assertEqual(discount_rate(Decimal("500.00")), Decimal("0.10"))

    def test_invoice_total(self) -> None:
        lines = [Line("A", 2, Decimal("250.00"))]
        self.assertEqual(invoice_total(lines), Decimal("450.00"))


if __name__ == "__main__":
    unittest.main()
