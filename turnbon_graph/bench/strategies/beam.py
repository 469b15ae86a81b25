"""Beam search over agent turns: `width` trajectories; each turn every one proposes N
candidates, each distinct candidate runs in a fork of its parent's environment, the
value model scores the children, and the best `width` (less those already ended) go
on. It is the base `Strategy`'s behaviour, named here."""

from __future__ import annotations

from turnbon_graph.bench.strategies.search import Strategy


class Beam(Strategy):
    name = "beam"
