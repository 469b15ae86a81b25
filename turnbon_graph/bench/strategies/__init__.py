"""Search strategies at the turn level for `turnbon bench --strategy NAME`, over the same
environment protocol and turn records as Turn-BoN: bon (the default), beam search and
particle filtering, each bounded by a token budget for comparisons at matched compute.

Modules, one concept each: `spec` (the strategy and its parameters), `search` (the loop
they share), `beam`, `particle`, `bon` (the strategies), `trajectory` (a trajectory and
one step of it in an environment), `value` (the value model's prompt and calls),
`budget` (the token ledger and its estimates), `tree` (the tree file), `episode` (an
episode of a search into a run folder) and `names` (the names alone, for the command
line). Nothing is imported here: the command line and the run folder's records each
load only the module they need.
"""
