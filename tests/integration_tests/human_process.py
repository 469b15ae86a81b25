"""One side of the cross-process human-choice test, run as its own Python process.

    python -m tests.integration_tests.human_process DB BASE_URL LOG start
    python -m tests.integration_tests.human_process DB BASE_URL LOG resume VALUE_JSON

`start` runs a Turn-BoN turn (HumanSelector) until it pauses and prints the interrupt;
`resume` resumes the same thread from the SQLite checkpoint with `Command(resume=VALUE)`
and prints what ran. The shell tool appends each command it runs to LOG.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from turnbon_graph import create_turnbon_graph, turn_record
from turnbon_graph.selectors import HumanSelector

THREAD: RunnableConfig = {"configurable": {"thread_id": "human-choice"}}


async def main(db: str, base_url: str, log: str, step: str, value: str | None) -> dict[str, Any]:
    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        with Path(log).open("a") as handle:
            handle.write(command + "\n")
        return f"ran: {command}"

    graph = create_turnbon_graph(
        "openai/stub",
        [shell],
        n=3,
        selector=HumanSelector(),
        max_concurrency=1,
        completion_kwargs={"api_base": base_url, "api_key": "sk-test"},
    )
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        app = graph.compile(checkpointer=saver)
        if step == "start":
            out = await app.ainvoke({"messages": [HumanMessage("fix the test")]}, THREAD)
            (pause,) = out["__interrupt__"]
            return {"interrupt": pause.value, "next": list((await app.aget_state(THREAD)).next)}
        assert value is not None
        out = await app.ainvoke(Command(resume=json.loads(value)), THREAD)
    chosen = next(m for m in out["messages"] if isinstance(m, AIMessage))
    record = turn_record(chosen)
    assert record is not None
    return {
        "record": record.to_json(),
        "executed": [m.tool_calls for m in out["messages"] if isinstance(m, AIMessage)],
        "reasoning": chosen.additional_kwargs.get("reasoning_content"),
        "tool_results": [m.content for m in out["messages"] if isinstance(m, ToolMessage)],
    }


if __name__ == "__main__":
    db, base_url, log, step, *rest = sys.argv[1:]
    result = asyncio.run(main(db, base_url, log, step, rest[0] if rest else None))
    print(json.dumps(result))
