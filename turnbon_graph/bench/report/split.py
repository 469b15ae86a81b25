"""The exploration/exploitation split in `turnbon report`, per setting, as "Test-Time
Scaling in the Wild" reports it per family: from each episode's verified leaves
(`metrics.exploration`), oracle (a passing trajectory was found), realised (it was the
one chosen), mu, headroom capture h and the value model's rank correlation with the
verifier rho_v; and, where `turnbon rollouts` wrote into the run folder, the same
measures at the level of one turn's candidates for bon at the same N."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnbon_graph.bench.report.format import DASH, number, pct, table
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats import metrics

UNDEFINED = "n/a"
"""A measure that is undefined for the setting (as opposed to not recorded, the dash)."""


def defined(value: float | None, digits: int = 2) -> str:
    """A number with `digits` decimals, or the mark of an undefined measure for None."""
    return UNDEFINED if value is None else number(value, digits)


def split_cells(split: metrics.Exploration | None) -> tuple[str, str, str, str]:
    """Oracle, realised, h and rho_v as the strategies' table shows them."""
    if split is None or not split.episodes:
        return (DASH,) * 4
    return pct(split.oracle), pct(split.realised), defined(split.h), defined(split.rho_v)


EXPLAINED = (
    "Oracle: the share of episodes in which some finished trajectory (a leaf) passed the "
    "verifier; realised: the share whose chosen trajectory passed (the pass rate over "
    "verified episodes); mu: the mean pass rate of an episode's leaves (a random pick); "
    "h = (realised - mu) / (oracle - mu), averaged over the episodes where it is defined "
    "(leaves of both verdicts); rho_v: Spearman between the leaves' values and verdicts, "
    f"over every scored leaf of the setting. {UNDEFINED}: undefined (no episode had "
    "headroom; fewer than two scored leaves, or no spread: bon keeps one trajectory and "
    f"has no value model); {DASH}: not recorded (rows written before leaves were "
    "verified). Every leaf was verified before its environment closed; the verifier's "
    "time on leaves other than the chosen one is its own column (no model tokens)."
)


def split_section(
    order: Sequence[str], groups: Mapping[str, list[EpisodeResult]], rollouts: Mapping[int, Any]
) -> list[str]:
    """The split's table, a row per setting, and the turn-level rows of `rollouts`
    (`turnbon rollouts`' summaries by N) for the bon settings."""
    rows = []
    for setting in order:
        rs = groups[setting]
        split = metrics.exploration(rs)
        if split is None or not split.episodes:
            rows.append((setting, str(len(rs)), *(DASH,) * 9))
        else:
            rows.append(
                (
                    setting,
                    str(split.episodes),
                    number(split.leaves / split.episodes, 2),
                    pct(split.oracle),
                    pct(split.realised),
                    pct(split.mu),
                    defined(split.h),
                    str(split.h_episodes),
                    defined(split.rho_v),
                    str(split.rho_pairs),
                    number(split.verify_s, 2),
                )
            )
        spec = rs[0].strategy
        summary = rollouts.get(rs[0].n) if spec is None or spec.name == "bon" else None
        if summary is not None:
            rows.append(
                (
                    f"{setting} (turn level)",
                    str(summary.complete_turns),
                    DASH,
                    pct(summary.mean_oracle),
                    pct(summary.mean_realised),
                    pct(summary.mean_mu),
                    defined(summary.mean_h),
                    str(summary.h_turns),
                    defined(summary.rho_v),
                    DASH,
                    DASH,
                )
            )
    return [
        "### Exploration and exploitation",
        "",
        EXPLAINED,
        *(
            [
                "",
                "A row marked (turn level) is from `turnbon rollouts` in this run folder: "
                "the same measures over one turn's candidates, each valued by rollouts to "
                "the verifier, counted in turns rather than episodes.",
            ]
            if rollouts
            else []
        ),
        "",
        *table(
            [
                "Setting",
                "Episodes",
                "Leaves / episode",
                "Oracle",
                "Realised",
                "mu",
                "h",
                "Episodes with headroom",
                "rho_v",
                "Scored leaves",
                "Verifier s / episode",
            ],
            rows,
        ),
        "",
    ]
