"""The `turnbon` command: one module per command (`run` for run and demo, `bench`,
`report`, `judge`, `analyze`, `rollouts`), the argument groups they share (`arguments`),
model and selector options (`models`), and the live display of `run` and `demo`
(`live`, `transcript`). What is not the command line lives in `turnbon_graph.bench` and
`turnbon_graph.analysis`."""

from __future__ import annotations

from turnbon_graph.cli.main import main

__all__ = ["main"]
