"""`turnbon report --match-spend`: each strategy's setting closest to a spend, compared."""

from __future__ import annotations

import math

from tests.helpers import strategy_rows as rows
from turnbon_graph.bench.report.matched import closest, matched_section

GROUPS = {
    "bon 60": rows("bon 60", [1, 0, 1, 0], 60, "bon", spent=50),
    "bon 200": rows("bon 200", [1, 1, 1, 0], 200, "bon", spent=100),
    "beam 100": rows("beam 100", [1, 1, 0, 0], 100, spent=70),
    "beam 400": rows("beam 400", [1, 1, 1, 1], 400, spent=200),
}


def test_each_strategy_takes_its_setting_nearest_by_ratio() -> None:
    # bon: 50 and 100 against 100, ratios 0.5 and 1: 100. beam: 70 and 200, ratios 0.7
    # (|log| 0.357) and 2 (|log| 0.693): 70.
    chosen = closest(list(GROUPS), GROUPS, 100.0, "tokens", 200, 0)
    assert chosen == {"bon": ("bon 200", 100.0), "beam": ("beam 100", 70.0)}
    # At 150: beam's 200 (|log 4/3| = 0.288) beats 70 (|log 0.467| = 0.762).
    assert closest(list(GROUPS), GROUPS, 150.0, "tokens", 200, 0)["beam"][0] == "beam 400"
    assert abs(math.log(200 / 150)) < abs(math.log(70 / 150))


def test_the_section_says_how_near_and_compares_them_as_pairs() -> None:
    lines = matched_section(list(GROUPS), GROUPS, 100.0, 200, 0)
    assert lines[0] == "### At matched spend: 100 tokens per episode"
    table = [line for line in lines if line.startswith("| ")]
    assert table[2].startswith("| bon | bon 200 | 100 | 1.00\u00d7 | yes | 75.0% | [")
    assert table[3].startswith("| beam | beam 100 | 70 | 0.70\u00d7 | no | 50.0% |")
    # The one pair: beam at 70 against bon at 100 did not spend alike (0.70x).
    (pair,) = [line for line in table if line.startswith("| ~100 tokens |")]
    assert "| 0.70\u00d7 | not matched |" in pair
