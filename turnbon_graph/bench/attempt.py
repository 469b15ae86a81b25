"""One episode run into a run folder: its turns file as it happens, then its result.

Every turn is appended to the episode's turns file with its observation as the agent's
states stream by; the `EpisodeResult` comes back to the runner, which writes its line
(`plan.record_episode`). The local runner calls `run_episode` on its event loop, each
Ray worker on its own, into a scratch folder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.episode import run_agent
from turnbon_graph.bench.running.runs import (
    EpisodeResult,
    append_line,
    current_worker,
    recorded_totals,
    setting_label,
    turns_path,
)
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.records import RECORD_KEY, TurnRecord
from turnbon_graph.turn.engine import TurnEngine

OBSERVATION_LIMIT = 4000
"""Characters of a tool result kept in the turns file (the full text went to the model)."""


async def run_episode(
    environment: Environment,
    engine: TurnEngine,
    task: TaskSpec,
    trial: int,
    n: int,
    run_dir: Path,
    *,
    strategy: StrategySpec | None = None,
    setting: str | None = None,
) -> EpisodeResult:
    """One attempt: the agent loop (and any follow-up user turns), then the verifier.
    `strategy`: the setting's, when it is not plain bon (fusion and refine run here,
    with their selector in `engine`); `setting`: its label (default: `N=<n>`)."""
    setting = setting or setting_label(n)
    log = TurnLog(turns_path(run_dir, setting, task.id, trial))
    started = time.monotonic()
    try:
        end = await run_agent(environment, engine, task, trial, on_state=log)
    finally:
        log.close()
    assert end.outcome is not None  # verified
    records = [TurnRecord.model_validate(r) for m in end.messages if (r := _record(m))]
    return EpisodeResult(
        task=task.id,
        trial=trial,
        setting=setting,
        n=n,
        **recorded_totals(records),
        turns=len(records),
        duration_s=round(time.monotonic() - started, 3),
        worker=current_worker(),
        **end.result_fields(task),
        strategy=strategy or StrategySpec(),
    )


class TurnLog:
    """The episode's turns file: each turn appended with its observation (the tool
    results that answer it) as the agent's states stream by."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")  # an unfinished earlier attempt starts over
        self._pending: dict[str, Any] | None = None

    def __call__(self, messages: list[BaseMessage]) -> None:
        last = messages[-1]
        if isinstance(last, AIMessage) and (record := _record(last)) is not None:
            self.close()
            self._pending = {"record": record, "observation": None}
        elif isinstance(last, ToolMessage) and self._pending is not None:
            self._pending["observation"] = [
                {"tool": m.name, "content": str(m.content)[:OBSERVATION_LIMIT]}
                for m in _tool_results(messages)
            ]
            self.close()

    def close(self) -> None:
        """Writes the turn still waiting for its observation, if any."""
        if self._pending is not None:
            append_line(self.path, json.dumps(self._pending, ensure_ascii=False))
            self._pending = None


def _tool_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool results that answer the last chosen action."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return results[::-1]


def _record(message: BaseMessage) -> dict[str, Any] | None:
    if isinstance(message, AIMessage):
        record = message.response_metadata.get(RECORD_KEY)
        return record if isinstance(record, dict) else None
    return None
