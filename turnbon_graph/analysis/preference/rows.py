"""The analyses' results as plain rows and as a Markdown table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from turnbon_graph.analysis.preference.behaviour import BehaviourPreference
from turnbon_graph.analysis.preference.lengths import LengthComparison

__all__ = ["markdown_table", "to_rows"]


def to_rows(
    results: Iterable[BehaviourPreference | LengthComparison],
) -> list[dict[str, Any]]:
    """Plain dicts, one per result: `pandas.DataFrame(to_rows(...))` in a notebook."""
    return [result.to_row() for result in results]


def markdown_table(rows: Sequence[Mapping[str, Any]], *, digits: int = 3) -> str:
    """A Markdown table of `rows` (columns of the first row); floats rounded to `digits`
    significant digits, None as an empty cell."""
    if not rows:
        return ""
    columns = list(rows[0])

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:.{digits}g}"
        return str(value).replace("|", "\\|")

    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)
