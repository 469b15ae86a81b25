"""Analyses of recorded runs, as in the paper: which behaviours the selector prefers
(Figures 4 and 5), what an LLM judge flags (Tables 3, 6 and 7), and how much of a pool's
headroom the selector captures (branch rollouts: oracle, realised, h, rho_v).

Names are imported on first use (PEP 562): `tag_command` does not pay for LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnbon_graph._exports import lazy_exports

if TYPE_CHECKING:
    from turnbon_graph.analysis.behaviours import TAGS, Executed, declares_complete, tag_command
    from turnbon_graph.analysis.judge import (
        FlaggedShare,
        JudgeVerdict,
        Rubric,
        flagged_shares,
        judge_run,
        load_rubrics,
        read_verdicts,
    )
    from turnbon_graph.analysis.preference import (
        BehaviourPreference,
        LengthComparison,
        behaviour_preference,
        length_comparison,
    )
    from turnbon_graph.analysis.rollouts import (
        ForkableEpisode,
        RolloutBudget,
        RolloutReport,
        Spend,
        UsageProfile,
        branch_rollouts,
        estimate_cost,
        format_plan,
        read_reports,
        summarise,
        write_report,
    )
    from turnbon_graph.analysis.trajectories import Trajectory, TurnView, load_trajectories

_SOURCES = {
    "TAGS": "behaviours",
    "Executed": "behaviours",
    "declares_complete": "behaviours",
    "tag_command": "behaviours",
    "FlaggedShare": "judge",
    "JudgeVerdict": "judge",
    "Rubric": "judge",
    "flagged_shares": "judge",
    "judge_run": "judge",
    "load_rubrics": "judge",
    "read_verdicts": "judge",
    "BehaviourPreference": "preference",
    "LengthComparison": "preference",
    "behaviour_preference": "preference",
    "length_comparison": "preference",
    "ForkableEpisode": "rollouts",
    "RolloutBudget": "rollouts",
    "RolloutReport": "rollouts",
    "Spend": "rollouts",
    "UsageProfile": "rollouts",
    "branch_rollouts": "rollouts",
    "estimate_cost": "rollouts",
    "format_plan": "rollouts",
    "read_reports": "rollouts",
    "summarise": "rollouts",
    "write_report": "rollouts",
    "Trajectory": "trajectories",
    "TurnView": "trajectories",
    "load_trajectories": "trajectories",
}

__all__ = [
    "TAGS",
    "BehaviourPreference",
    "Executed",
    "FlaggedShare",
    "ForkableEpisode",
    "JudgeVerdict",
    "LengthComparison",
    "RolloutBudget",
    "RolloutReport",
    "Rubric",
    "Spend",
    "Trajectory",
    "TurnView",
    "UsageProfile",
    "behaviour_preference",
    "branch_rollouts",
    "declares_complete",
    "estimate_cost",
    "flagged_shares",
    "format_plan",
    "judge_run",
    "length_comparison",
    "load_rubrics",
    "load_trajectories",
    "read_reports",
    "read_verdicts",
    "summarise",
    "tag_command",
    "write_report",
]


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
