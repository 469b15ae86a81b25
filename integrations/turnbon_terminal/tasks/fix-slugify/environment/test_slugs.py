"""Tests of slugs.slugify (run: python3 -m unittest test_slugs)."""

from __future__ import annotations

import unittest

from slugs import slugify


class SlugifyTest(unittest.TestCase):
    def test_lower_case_words(self) -> None:
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_runs_of_separators(self) -> None:
        self.assertEqual(slugify("  Tips, tricks -- and more!  "), "tips-tricks-and-more")

    def test_accents(self) -> None:
        self.assertEqual(slugify("Crème Brûlée"), "creme-brulee")

    def test_cut(self) -> None:
        self.assertEqual(slugify("abc def ghi", max_length=5), "abc-d")
        self.assertEqual(slugify("abcd efgh", max_length=5), "abcd")

    def test_empty(self) -> None:
        self.assertEqual(slugify("!!!"), "untitled")


if __name__ == "__main__":
    unittest.main()
