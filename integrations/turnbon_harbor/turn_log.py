"""What the agent leaves in its trial as it goes: the turns file and Harbor's context.

Harbor ends an agent that overruns its time by cancelling `run()`, and keeps only what is
already written. So each turn's record is written to `agent/turns.jsonl` as soon as its
observation is known (or when `run()` ends, cancelled or not, without one), one JSON line
`{"record": TurnRecord, "observation": [...]}` as in a `turnbon bench` run folder's
turns files; and the token counts go into Harbor's `AgentContext` the moment the turn is
chosen. `turnbon report` reads both back (`turnbon_graph.bench.readers.harbor_jobs`). Harbor's
own trajectory file, `agent/trajectory.json`, is `trajectory.py`'s.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.bench.attempt import OBSERVATION_LIMIT
from turnbon_graph.bench.running.runs import append_line
from turnbon_graph.records import TurnRecord, UsageSplit

if TYPE_CHECKING:
    from harbor.models.agent.context import AgentContext

TURNS_FILE = "turns.jsonl"
"""The turns file in the trial's agent folder (`BaseAgent.logs_dir`)."""
CONTEXT_KEY = "turnbon"
"""The key of the agent's own numbers in `AgentContext.metadata`."""
OBSERVATION_TOOL = "terminal"
"""How a turn's observation is labelled in the turns file."""


class TurnFile:
    """The trial's turns file: each turn appended once its observation is known."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: dict[str, Any] | None = None

    async def chosen(self, record: dict[str, Any]) -> None:
        """A turn was chosen; its line waits for the observation (an earlier turn still
        waiting is written as it is)."""
        await self.close()
        self._pending = {"record": record, "observation": None}

    async def observed(self, observation: str) -> None:
        """What the chosen turn led to: its line is written."""
        if self._pending is not None:
            content = observation[:OBSERVATION_LIMIT]
            self._pending["observation"] = [{"tool": OBSERVATION_TOOL, "content": content}]
            await self.close()

    async def close(self) -> None:
        """Writes the turn still waiting, if any (its observation None)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            line = json.dumps(pending, ensure_ascii=False)
            await asyncio.to_thread(append_line, self.path, line)


class TurnTotals:
    """The episode's tokens and cost so far, split generator/selector (Table 1)."""

    def __init__(self, n: int, selector: str) -> None:
        self.n = n
        self.selector = selector
        self.turns = 0
        self.usage = UsageSplit()

    def add(self, record: TurnRecord) -> None:
        self.turns += 1
        self.usage = UsageSplit(
            generator=self.usage.generator + record.usage.generator,
            selector=self.usage.selector + record.usage.selector,
        )

    def fill(self, context: AgentContext) -> None:
        """Harbor's `AgentContext`: totals over generator and selector calls (what Harbor
        sums per job), and the split under `metadata["turnbon"]`."""
        both = self.usage.total
        context.n_input_tokens = both.prompt_tokens
        context.n_output_tokens = both.completion_tokens
        context.n_cache_tokens = both.cached_tokens
        context.cost_usd = both.cost_usd
        context.metadata = {
            **(context.metadata or {}),
            CONTEXT_KEY: {
                "turns": self.turns,
                "n": self.n,
                "selector": self.selector,
                "usage": self.usage.model_dump(),
            },
        }
