"""All-pairs comparisons at equal budget: Holm-Bonferroni's adjusted p-values, the pairs
a run's settings make (never across budgets), and the report's table of them."""

from __future__ import annotations

import random

import pytest

from tests.helpers import strategy_rows as rows
from turnbon_graph.bench.report.format import DASH
from turnbon_graph.bench.report.pairs import TITLE, pairs_section
from turnbon_graph.bench.stats.bootstrap import holm
from turnbon_graph.bench.stats.pairs import all_pairs


def test_holm_multiplies_the_ith_smallest_by_m_minus_i_plus_1_and_keeps_the_order() -> None:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.02]) == [0.02] and holm([]) == []


def test_holm_controls_the_family_wise_error_rate_under_the_null() -> None:
    """20 true null hypotheses, 2000 times: a raw p below 0.05 calls some difference
    significant in most families; Holm's adjusted p in at most 5% of them."""
    rng = random.Random(7)
    raw_calls = holm_calls = 0
    for _ in range(2000):
        p_values = [rng.random() for _ in range(20)]
        raw_calls += any(p < 0.05 for p in p_values)
        holm_calls += any(p < 0.05 for p in holm(p_values))
    assert raw_calls / 2000 > 0.5 and holm_calls / 2000 <= 0.06


def test_settings_are_compared_in_pairs_within_a_budget_only() -> None:
    good, bad = [1] * 12, [0] * 12
    groups = {
        "a 2000": rows("a 2000", good, 2000),
        "b 2000": rows("b 2000", bad, 2000, "particle"),
        "c 2000": rows("c 2000", [1, 0] * 6, 2000, "bon"),
        "a 8000": rows("a 8000", good, 8000),
        "b 8000": rows("b 8000", good, 8000, "particle"),
    }
    pairs = all_pairs(list(groups), groups, resamples=2000, seed=1)
    assert [(p.budget, p.a, p.b) for p in pairs] == [
        ("2000 tokens", "a 2000", "b 2000"),
        ("2000 tokens", "a 2000", "c 2000"),
        ("2000 tokens", "b 2000", "c 2000"),
        ("8000 tokens", "a 8000", "b 8000"),
    ]
    first = pairs[0]
    assert first.result is not None and first.result.difference == -1.0
    # the sign-flip test: 2 of the 2^12 signings as far from 0, then x4 for four pairs
    assert first.adjusted == pytest.approx(4 * 2 / 2**12) and first.significant
    assert all(p.adjusted is not None and p.result is not None for p in pairs)
    assert all(p.adjusted >= p.result.p_value for p in pairs)  # type: ignore[operator, union-attr]
    same = pairs[3]
    assert same.result is not None and same.result.difference == 0 and not same.significant


def test_the_report_tables_every_pair_with_its_adjusted_p() -> None:
    groups = {
        "a": rows("a", [1] * 8, None),
        "b": rows("b", [0] * 8, None, "particle"),
        "c": rows("c", [1] * 8, None, "lookahead"),
    }
    lines = pairs_section(list(groups), groups, 1000, 0)
    assert lines[0] == f"### {TITLE}"
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].startswith("| Budget | A | B | B - A | 95% CI | p-value | Holm p |")
    assert len(table) == 2 + 3  # header, rule, three pairs
    assert f"| {DASH} | a | b | -100.0 pp |" in table[2]
    # Every task 100 points apart: the fewest tasks the exact test needs, 6.
    assert table[2].endswith("| 0.0078 | 0.0234 | 1.00\u00d7 | yes | 8 | 6 |")
    assert "3 of 3 pairs spent alike; 2 differ" in "\n".join(lines)
    assert pairs_section(["a"], {"a": groups["a"]}, 100, 0) == []  # nothing to pair


def test_a_pair_that_did_not_spend_alike_is_shown_but_never_called_different() -> None:
    """At one cap, b spent 130 tokens an episode where a spent 100 (1.30x: outside
    1 +/- 0.25) and c 120 (1.20x: inside). a against b is left out of the adjusted family
    and not significant however its tasks differ; the two others are adjusted as two."""
    groups = {
        "a": rows("a", [1] * 12, 2000, spent=100),
        "b": rows("b", [0] * 12, 2000, "particle", spent=130),
        "c": rows("c", [0] * 12, 2000, "bon", spent=120),
    }
    ab, ac, bc = all_pairs(list(groups), groups, resamples=500, seed=1)
    assert ab.spend_ratio == pytest.approx(1.3) and not ab.matched
    assert ab.adjusted is None and not ab.significant
    assert ab.result is not None and ab.result.p_value == pytest.approx(2 / 2**12)
    assert ac.spend_ratio == pytest.approx(1.2) and ac.matched and ac.significant
    assert ac.adjusted == pytest.approx(2 * 2 / 2**12)  # a family of two
    assert bc.spend_ratio == pytest.approx(120 / 130) and bc.matched
    table = [line for line in pairs_section(list(groups), groups, 500, 1) if line.startswith("| ")]
    assert f"| {DASH} | 1.30\u00d7 | not matched |" in table[2]
