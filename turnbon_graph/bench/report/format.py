"""Markdown formatting of `turnbon report`'s tables and numbers: the paper's marks,
percentages, percentage points, ratios and token counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

DASH = "\u2013"  # the paper's mark for "none" / "not applicable"
TIMES = "\u00d7"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], left: int = 1) -> list[str]:
    """A Markdown table: the first `left` columns left-aligned, the (numbers) right."""
    align = [":--" if i < left else "--:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def section(
    heading: str, explain: str, header: Sequence[str], rows: Iterable[Sequence[str]], left: int = 1
) -> list[str]:
    """A report section of one table: its heading, what it shows, the table."""
    return [heading, "", explain, "", *table(header, rows, left), ""]


def image(plots: Mapping[str, str], name: str, alt: str) -> list[str]:
    """The Markdown lines of plot `name`, or none when the run has no such plot."""
    return [f"![{alt}]({plots[name]})", ""] if name in plots else []


def cell(text: str) -> str:
    """`text` fit for a Markdown table cell (pipes escaped, newlines as spaces)."""
    # A pipe or newline inside a cell would break the table.
    return text.replace("|", "\\|").replace("\n", " ")


def short(text: str, limit: int = 240) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


P_FLOOR = 0.0001
"""p-values below it are shown as `< 0.0001`."""


def pct(share: float | None) -> str:
    """A share as a percentage with one decimal; a dash for None."""
    return DASH if share is None else f"{100 * share:.1f}%"


def pp(share: float | None) -> str:
    """A share difference in signed percentage points; a dash for None."""
    return DASH if share is None else f"{100 * share:+.1f} pp"


def interval(low: float | None, high: float | None) -> str:
    """A 95% interval of a share difference, in percentage points."""
    return DASH if low is None or high is None else f"[{pp(low)}, {pp(high)}]"


def p_value(p: float | None) -> str:
    """Four decimals, or `< 0.0001` below that."""
    if p is None:
        return DASH
    return f"< {P_FLOOR:.4g}" if p < P_FLOOR else f"{p:.4f}"


def number(value: float | None, digits: int = 1, *, signed: bool = False) -> str:
    """A measurement with `digits` decimals (signed: with its sign), or the dash."""
    if value is None:
        return DASH
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def ratio(value: float | None, digits: int = 1) -> str:
    """A ratio with `digits` decimals (one by default) and a times sign; a dash for None."""
    return DASH if value is None else f"{value:.{digits}f}{TIMES}"


def tokens(count: float) -> str:
    """Like the paper: 72K, 1.2M; small counts in full."""
    if count >= 1e6:
        return f"{count / 1e6:.1f}M"
    if count >= 1e5:
        return f"{count / 1e3:.0f}K"
    if count >= 1e3:
        return f"{count / 1e3:.1f}K"
    return f"{count:.0f}"


NEEDED_HEADER = "Tasks for 80% power"
NEEDED_EXPLAINED = (
    "Tasks for 80% power: about how many tasks a difference of the observed size (and "
    "spread over tasks) needs to be found significant at 0.05 four times in five (the "
    "normal approximation, at least 6: below that the exact test cannot reach 0.05); "
    f"{DASH} where the difference is 0."
)


def needed(tasks: int | None) -> str:
    """The tasks-needed cell: the count, or the dash where there is nothing to find."""
    return DASH if tasks is None else f"{tasks:,}"
