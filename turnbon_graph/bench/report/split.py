"""The exploration/exploitation split in `turnbon report`, per setting, as "Test-Time
Scaling in the Wild" reports it per family (`decomposition`): the naive oracle (a
passing trajectory was found), realised (it was the one chosen), mu (the run's BoN N=1
pass rate), headroom capture h and the value model's rank correlation with the verifier
rho_v, from task-level points; and, where `turnbon rollouts` wrote into the run folder,
the same measures at the level of one turn's candidates for bon at the same N."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnbon_graph.bench.report.format import DASH, image, number, pct, table
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.decomposition import Exploration, exploration, single_sample

HEADROOM_PLOT = "headroom_rho"
"""The decomposition's figure: h against rho_v per task-level point."""
UNDEFINED = "n/a"
"""A measure that is undefined for the setting (as opposed to not recorded, the dash)."""


def defined(value: float | None, digits: int = 2) -> str:
    """A number with `digits` decimals, or the mark of an undefined measure for None."""
    return UNDEFINED if value is None else number(value, digits)


def split_cells(split: Exploration | None) -> tuple[str, str, str, str]:
    """Oracle, realised, h and rho_v as the strategies' table shows them."""
    if split is None or not split.episodes:
        return (DASH,) * 4
    return pct(split.oracle), pct(split.realised), defined(split.h), defined(split.rho_v)


EXPLAINED = (
    'The decomposition of "Test-Time Scaling in the Wild" (its Equation 4), from '
    "task-level points (one setting on one task, over its trials). Naive oracle: the "
    "share of trials in which some finished trajectory (a leaf) passed the verifier, the "
    "best leaf observed with no bias correction; trajectories pruned while still live "
    "were not verified, so it is a lower bound. Realised: the share whose chosen leaf "
    "passed. mu: the run's BoN N=1 pass rate on the same tasks (the single-sample "
    "mean). Each is averaged over tasks; h = (realised - mu) / (oracle - mu) of those "
    "means (the paper's Table 15). rho_v: Spearman between the leaves' values and "
    "verdicts within a task, averaged over the tasks where it is defined (its Table 30). "
    f"{UNDEFINED}: undefined (oracle equal to mu; fewer than two scored leaves in every "
    f"task, or no spread: bon keeps one trajectory and has no value model); {DASH}: not "
    "recorded (rows written before leaves were verified). Every leaf was verified "
    "before its environment closed; the verifier's time on leaves other than the chosen "
    "one is its own column (no model tokens)."
)
NO_SINGLE_SAMPLE = (
    "mu and h need the run's BoN N=1 setting (plain bon at N=1) over the same tasks, and "
    f"this run has none that ran every task: they are {UNDEFINED} where it is missing. "
    "Run `turnbon bench` with `--single-sample` (it adds that setting) for them."
)
HEADROOM_ALT = (
    "Headroom capture h against rho_v, one point per setting and task, with the identity "
    "line and the least-squares fit (Test-Time Scaling in the Wild, Figure 3, left)"
)
NO_FIGURE = (
    "no task-level point has both h and rho_v defined (h needs the N=1 setting and a "
    "task whose naive oracle differs from mu; rho_v needs scored leaves of both verdicts "
    "within a task)."
)


def split_section(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    rollouts: Mapping[int, Any],
    plots: Mapping[str, str],
) -> list[str]:
    """The split's table, a row per setting, and the turn-level rows of `rollouts`
    (`turnbon rollouts`' summaries by N) for the bon settings."""
    rows = []
    single = single_sample(groups)
    splits = {setting: exploration(groups[setting], single) for setting in order}
    for setting in order:
        rs = groups[setting]
        split = splits[setting]
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
                    UNDEFINED if split.mu is None else pct(split.mu),
                    defined(split.h),
                    str(split.h_tasks),
                    defined(split.rho_v),
                    str(split.rho_tasks),
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
                "Naive oracle",
                "Realised",
                "mu (N=1)",
                "h",
                "Tasks with h",
                "rho_v",
                "Tasks with rho_v",
                "Verifier s / episode",
            ],
            rows,
        ),
        "",
        *([NO_SINGLE_SAMPLE, ""] if any(s and s.mu is None for s in splits.values()) else []),
        *(
            image(plots, HEADROOM_PLOT, HEADROOM_ALT)
            if HEADROOM_PLOT in plots
            else [f"No h-rho_v figure: {NO_FIGURE}", ""]
        ),
    ]
