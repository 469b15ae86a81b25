"""Figures of the analyses: the paper's Figures 4 and 5 and Table 3, and the companion
study's exploration/exploitation measures (oracle, realised, mu, headroom capture h and
verifier correlation rho_v) from branch rollouts.

Figures 2 and 3 and Tables 1 and 2 are drawn by `turnbon_graph.bench.report.plots` (the plots of
`turnbon report`); this package draws what that one cannot, from the result objects of
`turnbon_graph.analysis`:

    plot_preference(behaviour_preference(...))      Figure 4
    plot_lengths(length_comparison(...))            Figure 5
    plot_flagged(flagged_shares(...))               Table 3
    plot_oracle_realised(read_reports(run))         study Figure 2: oracle vs realised
    plot_headroom(read_reports(run))                h per branched turn, per selector
    plot_h_vs_rho(read_reports(run))                study Figure 3 (left): h against rho_v

Each function returns a matplotlib `Figure` on an Agg canvas and shows nothing (no
pyplot): in a notebook the figure is displayed as the cell's value, elsewhere
`figure.savefig(path)`. matplotlib (the `plots` extra) is imported inside the functions.
A star marks a difference whose sign-flip p-value (over tasks) is below `alpha`.

A package rather than one module with siblings: each module draws the results of one
analysis (`preference`: Figures 4 and 5, `flagged`: Table 3, `rollouts`: the study's
figures) on the shared `canvas`, and this face re-exports them all, so
`from turnbon_graph.analysis import figures; figures.plot_preference(...)` is unchanged.
"""

from __future__ import annotations

from turnbon_graph.analysis.figures.canvas import SIGNIFICANT
from turnbon_graph.analysis.figures.flagged import plot_flagged
from turnbon_graph.analysis.figures.preference import (
    BEHAVIOUR_TITLES,
    plot_lengths,
    plot_preference,
)
from turnbon_graph.analysis.figures.rollouts import (
    plot_h_vs_rho,
    plot_headroom,
    plot_oracle_realised,
    rollout_label,
    rollout_summaries,
)

__all__ = [
    "BEHAVIOUR_TITLES",
    "SIGNIFICANT",
    "plot_flagged",
    "plot_h_vs_rho",
    "plot_headroom",
    "plot_lengths",
    "plot_oracle_realised",
    "plot_preference",
    "rollout_label",
    "rollout_summaries",
]
