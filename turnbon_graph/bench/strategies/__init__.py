"""Search strategies at the turn level for `turnbon bench --strategy NAME`, over the same
environment protocol and turn records as Turn-BoN: bon (the default), beam search,
particle filtering, lookahead and escalate, each bounded by a budget for comparisons at
matched spend.

Modules, one concept each: `names` and `spec` (the strategies, their parameters and
bounds), `search` (the loop they share and the `Strategy` hooks), `forest` (its tree
and environments), `selection` (which trajectories go on: beam's top W, particle
resampling), `beam`, `particle`, `bon`, `lookahead`, `escalate` (the strategies),
`trajectory` (a trajectory and one step of it in an environment), `value` (what scores
a partial trajectory: `ValueFunction`, and the value model), `budget` (the spend, its
unit and the estimates learned from the run's calls), `metered` (every call counted and
clamped to what is left), `leaves` (every finished trajectory verified), `record` (what
a search adds to its episode's row) and `tree` (the tree file). Nothing is imported
here: the command line and the run folder's records each load only the module they need.
"""
