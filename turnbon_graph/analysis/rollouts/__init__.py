"""Exploration vs exploitation at the turn level, measured by branch rollouts.

At a sampled turn the N candidates sit in the graph's state (checkpointed between the
`generate` and `select` nodes) and the working directory is as the turn saw it. Each
candidate's value is estimated by forking the episode (a copy of its working
directory), restoring that checkpoint into a graph bound to the fork's tools, forcing
the candidate as the turn's action, continuing to the end with a fixed continuation
policy, and running the verifier: the mean pass over R such rollouts. The main episode
meanwhile goes on with its own selector's pick. From the values, as in the companion
study (*Test-Time Scaling in the Wild*, docs/references.md):

    oracle    the best candidate's value: is a good action in the pool (exploration)?
    realised  the value of the candidate the selector picked
    mu        the pool mean: what a uniformly random pick gets
    h         headroom capture (realised - mu) / (oracle - mu): 1 = the best pick,
              0 = no better than random, < 0 = worse (exploitation). Undefined (None)
              when oracle == mu: every candidate is worth the same, there is no headroom.
    rho_v     verifier correlation: Spearman (ties by average ranks) between a scoring
              selector's scores and the values; the study finds h ~ rho_v.

With few rollouts a value is a noisy estimate, and the best of N noisy estimates
overstates the oracle (the study's "naive oracle"): h is then conservative.

Per turn and aggregated (`summarise`). Candidates that propose the same action share
their rollouts (they are the same action), and failed candidates have no value (they
could not be picked). Budgets (`RolloutBudget`) cap the turns branched, the rollouts per
candidate and the rollouts and tokens overall; what a cap skipped is recorded.
`estimate_cost` and `format_plan` say what a run will cost before it starts.

Only episodes that can be forked take part: `ForkableEpisode` (the terminal
environment's episodes are). A fork copies files, not processes: a background server
the agent started is not running in the forks.

Recorded episodes (a run folder) are not replayed here: rebuilding a turn's working
directory by re-running the commands before it is not faithful in general (outputs
that name the episode's directory, time or randomness differ, and the turns file keeps
only the first 4000 characters of each observation to compare against), so values are
estimated on live episodes only.

The modules: `models` (the records, their file and `summarise`), `statistics` (h and
rho_v), `budget` (budgets, spend and the cost plan) and `live` (the live driver,
`branch_rollouts`).
"""

from turnbon_graph.analysis.rollouts.budget import (
    CostEstimate,
    RolloutBudget,
    Spend,
    UsageProfile,
    estimate_cost,
    format_plan,
)
from turnbon_graph.analysis.rollouts.live import (
    ForkableEpisode,
    branch_rollouts,
    continuation_engine,
)
from turnbon_graph.analysis.rollouts.models import (
    ROLLOUTS_FILE,
    BranchTurn,
    CandidateValue,
    Rollout,
    RolloutOutcome,
    RolloutReport,
    RolloutSummary,
    SkippedRollout,
    SkippedTurn,
    read_reports,
    summarise,
    write_report,
)
from turnbon_graph.analysis.rollouts.statistics import average_ranks, headroom, spearman

__all__ = [
    "ROLLOUTS_FILE",
    "BranchTurn",
    "CandidateValue",
    "CostEstimate",
    "ForkableEpisode",
    "Rollout",
    "RolloutBudget",
    "RolloutOutcome",
    "RolloutReport",
    "RolloutSummary",
    "SkippedRollout",
    "SkippedTurn",
    "Spend",
    "UsageProfile",
    "average_ranks",
    "branch_rollouts",
    "continuation_engine",
    "estimate_cost",
    "format_plan",
    "headroom",
    "read_reports",
    "spearman",
    "summarise",
    "write_report",
]
