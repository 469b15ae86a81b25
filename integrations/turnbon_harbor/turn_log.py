"""What the agent leaves in its trial as it goes: the turns file and Harbor's context.

Harbor ends an agent that overruns its time by cancelling `run()`, and keeps only what is
already written. So each turn's record is written to `agent/turns.jsonl` as soon as its
observation is known (or when `run()` ends, cancelled or not, without one), one JSON line
`{"record": TurnRecord, "observation": [...]}` as in a `turnbon bench` run folder's
turns files; and the token counts go into Harbor's `AgentContext` the moment the turn is
chosen, per model too (`model_usage`: the generator's tokens under `-m`, the selector's
under the selector's own model). A line that cannot be written (a full disk, a folder
made read-only) is logged as a warning and the trial goes on without it. `turnbon
report` reads both back (`turnbon_graph.bench.readers.harbor_jobs`). Harbor's own
trajectory file, `agent/trajectory.json`, is `trajectory.py`'s.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.bench.attempt import OBSERVATION_LIMIT
from turnbon_graph.bench.running.runs import append_line
from turnbon_graph.records import TurnRecord, Usage, UsageSplit

if TYPE_CHECKING:
    from harbor.models.agent.context import AgentContext

TURNS_FILE = "turns.jsonl"
"""The turns file in the trial's agent folder (`BaseAgent.logs_dir`)."""
CONTEXT_KEY = "turnbon"
"""The key of the agent's own numbers in `AgentContext.metadata`."""
OBSERVATION_TOOL = "terminal"
"""How a turn's observation is labelled in the turns file."""


LOGGER = logging.getLogger(__name__)


class TurnFile:
    """The trial's turns file: each turn appended once its observation is known."""

    def __init__(self, path: Path, logger: logging.Logger | None = None) -> None:
        self.path = path
        self.logger = logger or LOGGER
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
            try:
                await asyncio.to_thread(append_line, self.path, line)
            except OSError as exc:
                self.logger.warning(
                    "could not write turn %s to %s (%s); the trial goes on without it",
                    pending["record"].get("turn_id"),
                    self.path,
                    exc,
                )


class TurnTotals:
    """The episode's tokens and cost so far, split generator/selector (Table 1), and
    the models they were spent on."""

    def __init__(
        self, n: int, selector: str, model: str | None = None, selector_model: str | None = None
    ) -> None:
        self.n = n
        self.selector = selector
        self.model = model
        """The generator's model (`-m`)."""
        self.selector_model = selector_model or selector
        """The model the selector's calls went to (its name when it has no one model)."""
        self.turns = 0
        self.usage = UsageSplit()

    def add(self, record: TurnRecord) -> None:
        self.turns += 1
        self.usage = UsageSplit(
            generator=self.usage.generator + record.usage.generator,
            selector=self.usage.selector + record.usage.selector,
        )

    def by_model(self) -> dict[str, Usage]:
        """The tokens by the model they were spent on: the generator's under its model,
        the selector's under the selector's (one entry when they are the same); a model
        with no call is left out."""
        spent: dict[str, Usage] = {}
        for model, usage in (
            (self.model, self.usage.generator),
            (self.selector_model, self.usage.selector),
        ):
            if model and (usage.calls or usage.prompt_tokens or usage.completion_tokens):
                spent[model] = spent.get(model, Usage()) + usage
        return spent

    def fill(self, context: AgentContext) -> None:
        """Harbor's `AgentContext`: totals over generator and selector calls (what Harbor
        sums per job), per model (`model_usage`, so Harbor does not book every token
        under the generator's model from the trajectory), and the split under
        `metadata["turnbon"]`."""
        from harbor.models.agent.context import ModelUsage

        both = self.usage.total
        context.n_input_tokens = both.prompt_tokens
        context.n_output_tokens = both.completion_tokens
        context.n_cache_tokens = both.cached_tokens
        context.cost_usd = both.cost_usd
        context.model_usage = {
            model: ModelUsage(
                n_input_tokens=usage.prompt_tokens,
                n_cache_tokens=usage.cached_tokens,
                n_output_tokens=usage.completion_tokens,
                cost_usd=usage.cost_usd,
            )
            for model, usage in self.by_model().items()
        }
        context.metadata = {
            **(context.metadata or {}),
            CONTEXT_KEY: {
                "turns": self.turns,
                "n": self.n,
                "selector": self.selector,
                "usage": self.usage.model_dump(),
            },
        }


def selector_model(selector: object) -> str | None:
    """The model a selector's calls go to: an LLM selector's (`llm:`, `fusion:`,
    `refine:`), an ensemble's when its judges share one; None for one that calls no model
    (`first`, `random`, ...) or several.

    Args:
        selector: The turn engine's selector.

    Returns:
        The model's id, or None.
    """
    model = getattr(selector, "model", None)
    if isinstance(model, str):
        return model
    judges = {getattr(judge, "model", None) for judge in getattr(selector, "judges", None) or []}
    if len(judges) == 1 and isinstance(only := judges.pop(), str):
        return only
    return None
