"""Beam search over agent turns: `width` trajectories; each turn every one proposes N
candidates, each distinct candidate runs in a fork of its parent's environment, the
value model scores the children, and the top `width` of the finished trajectories and
the children together go on (`selection.top_width`): the search stops when they have all
finished. It is the base `Strategy`'s behaviour, named here."""

from __future__ import annotations

from turnbon_graph.bench.strategies.registry import built_in
from turnbon_graph.bench.strategies.search import Strategy


class Beam(Strategy):
    """Beam search over turns: the `width` best trajectories by value go on."""

    kind = built_in("beam")
