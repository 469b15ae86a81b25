"""turnbon-inspect: Turn-BoN as an Inspect AI agent.

`turn_bon()` is a model for Inspect's `react()` agent; `turn_bon_agent()` is the whole
agent. Each turn asks the eval's model for N candidates, a selector chooses one, and only
its tool calls run, with the eval's tools in the eval's sandbox. Both are registered with
Inspect (`inspect eval TASK --solver turnbon_inspect/turn_bon_agent -S n=4`); each turn's
candidates, choice, reason and tokens go into the sample's transcript, and its record
into the sample's store, which `turnbon report LOGDIR` reads.
"""

from __future__ import annotations

from turnbon_inspect.agent import SELECTORS, TURNS_KEY, turn_bon, turn_bon_agent

__all__ = ["SELECTORS", "TURNS_KEY", "turn_bon", "turn_bon_agent"]
