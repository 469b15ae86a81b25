"""`turnbon demo`: one small task, solved turn by turn, with every candidate shown live.

Without `--model` it runs against the bundled loopback stub server, playing a scripted
generator (whose candidates disagree, some of them wrong) and a scripted toy selector, so
it needs no API key and no network: it shows the mechanics, not a model's judgement.
With `--model` (any LiteLLM id, its API key in the environment) the same task runs on
a real model.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from turnbon_graph.graph import create_turnbon_agent
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, tool_call
from turnbon_graph.turn import turn_record

NUMBERS = [17, 4, 23, 8, 15]
TASK = (
    "The workspace has a file numbers.txt with one integer per line. Write their sum, "
    "and nothing else, to total.txt. Reply 'done' when total.txt is correct."
)


def workspace_tools(root: Path) -> list[BaseTool]:
    """Three file tools confined to `root`."""

    def resolve(name: str) -> Path:
        path = (root / name).resolve()
        if root.resolve() not in path.parents:
            raise ValueError(f"{name!r} is outside the workspace")
        return path

    @tool
    def list_files() -> str:
        """List the files in the workspace."""
        return "\n".join(sorted(p.name for p in root.iterdir()))

    @tool
    def read_file(name: str) -> str:
        """Return the text of a workspace file."""
        return resolve(name).read_text()

    @tool
    def write_file(name: str, content: str) -> str:
        """Write text to a workspace file, replacing what was there."""
        resolve(name).write_text(content)
        return f"wrote {len(content)} characters to {name}"

    return [list_files, read_file, write_file]


def scripted_model(seed: int) -> Callable[[CapturedRequest], dict[str, Any]]:
    """A stand-in for a model: plausible candidates per turn, some wrong, and a toy
    selector that prefers progress and the correct sum."""
    rng = random.Random(seed)
    total = sum(NUMBERS)

    def generator(tool_results: int) -> dict[str, Any]:
        options: list[tuple[str, dict[str, Any]] | str]
        if tool_results == 0:
            options = [("list_files", {}), ("read_file", {"name": "numbers.txt"})]
        elif tool_results == 1:
            options = [("read_file", {"name": "numbers.txt"}), ("list_files", {})]
        elif tool_results == 2:
            wrong = total - rng.choice(NUMBERS)  # an off-by-one-line mistake
            options = [
                ("write_file", {"name": "total.txt", "content": str(total)}),
                ("write_file", {"name": "total.txt", "content": str(wrong)}),
            ]
        elif tool_results == 3:
            options = [("read_file", {"name": "total.txt"}), "done"]
        else:
            options = ["done"]
        pick = rng.choice(options)
        if isinstance(pick, str):
            return chat_completion(pick)
        return chat_completion(tool_calls=[tool_call(pick[0], pick[1])])

    def selector(user_text: str) -> dict[str, Any]:
        blocks = re.findall(r'<candidate index="(\d+)">\n(.*?)\n</candidate>', user_text, re.S)
        shown = [(int(i), json.loads(body)) for i, body in blocks]

        def score(candidate: dict[str, Any]) -> int:
            calls = candidate.get("tool_calls") or []
            if not calls:
                return 1
            name, args = calls[0]["name"], calls[0]["args"]
            if name == "write_file":
                return 5 if args.get("content") == str(total) else 0
            return 3 if args.get("name") == "numbers.txt" else 2

        best = max(shown, key=lambda item: score(item[1]))
        reason = "it makes progress toward a correct total.txt"
        return chat_completion(json.dumps({"reason": reason, "selected_index": best[0]}))

    def respond(request: CapturedRequest) -> dict[str, Any]:
        body = request.body or {}
        messages = body.get("messages", [])
        first = messages[0].get("content", "") if messages else ""
        if isinstance(first, str) and first.startswith("You are the selector"):
            return selector(messages[1]["content"])
        return generator(sum(1 for m in messages if m.get("role") == "tool"))

    return respond


def _short(value: Any, width: int = 70) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _describe(message: AIMessage) -> str:
    if message.tool_calls:
        call = message.tool_calls[0]
        return f"{call['name']}({json.dumps(call['args'])})"
    return f"answer: {_short(message.content)}"


async def run_demo(
    *, model: str | None = None, n: int = 4, selector: str | None = None, seed: int = 0
) -> bool:
    """Runs the demo task and prints each turn; returns whether total.txt is correct."""
    with tempfile.TemporaryDirectory(prefix="turnbon-demo-") as tmp, StubServer() as stub:
        root = Path(tmp)
        (root / "numbers.txt").write_text("\n".join(map(str, NUMBERS)) + "\n")
        (root / "README.md").write_text("A tiny workspace for the turnbon demo.\n")
        if model is None:
            stub.script(scripted_model(seed))
            model = "openai/scripted-stub"
            options: dict[str, Any] = {
                "completion_kwargs": {"api_base": stub.base_url, "api_key": "no-key-needed"}
            }
            print("Model: scripted stub on loopback (no API key; shows the mechanics only).")
        else:
            options = {"selector": selector}
            print(f"Model: {model}; selector: {selector or model}")
        agent = create_turnbon_agent(
            model, workspace_tools(root), n=n, max_turns=10, seed=seed, **options
        ).compile()
        print(f"Task: {TASK}\n")
        totals = {"turns": 0, "generator": 0, "selector": 0}
        stream = agent.astream({"messages": [HumanMessage(TASK)]}, stream_mode="updates")
        async for update in stream:
            for node_update in update.values():
                for message in (node_update or {}).get("messages", []):
                    _print_message(message, totals)
        correct = (root / "total.txt").exists() and (root / "total.txt").read_text().strip() == str(
            sum(NUMBERS)
        )
    verdict = "PASS" if correct else "FAIL"
    print(
        f"\nVerdict: {verdict} (total.txt {'holds' if correct else 'does not hold'} {sum(NUMBERS)})"
    )
    print(
        f"Tokens: generator {totals['generator']}, selector {totals['selector']}, "
        f"total {totals['generator'] + totals['selector']}"
    )
    return correct


def _print_message(message: Any, totals: dict[str, int]) -> None:
    if isinstance(message, ToolMessage):
        print(f"  -> {message.name}: {_short(message.content)}\n")
        return
    record = turn_record(message) if isinstance(message, AIMessage) else None
    if record is None:
        return
    totals["turns"] += 1
    print(f"Turn {totals['turns']}: {record.n_ok} of {record.n_requested} candidates answered")
    for candidate in record.candidates:
        mark = "*" if candidate.index == record.selected_index else " "
        if candidate.error:
            print(f"  {mark} [{candidate.index}] failed: {_short(candidate.error)}")
            continue
        shown = AIMessage(content=candidate.content or "", tool_calls=candidate.tool_calls)
        print(f"  {mark} [{candidate.index}] {_describe(shown)}")
    why = record.selector
    if record.selector_answer:
        try:
            why += f": {_short(json.loads(record.selector_answer).get('reason', ''))}"
        except (ValueError, AttributeError):
            why += f": {_short(record.selector_answer)}"
    if record.fallback:
        why += f" (fallback: {record.fallback})"
    print(f"  chosen [{record.selected_index}] by {why}")
    totals["generator"] += record.usage.generator.total_tokens
    totals["selector"] += record.usage.selector.total_tokens
