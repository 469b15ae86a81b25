"""One attempt at one BFCL entry: its backends as LangChain tools, then BFCL's checker.

The agent's calls are executed the way BFCL's own inference loop executes them: all the
calls of one model step in order, through BFCL's `execute_multi_turn_func_call`, on this
episode's own backend instances. Each step's calls are recorded, as BFCL call strings,
under the user turn they answer; the checker later replays exactly those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolRuntime

from turnbon_bfcl import bfcl_api
from turnbon_bfcl.bfcl_api import Entry
from turnbon_bfcl.errors import BFCLToolContextError
from turnbon_bfcl.schema import call_string, openai_function, unsafe_argument_names
from turnbon_graph.bench.environment import Verdict

DETAILS_LIMIT = 2500
"""Characters of the checker's details kept in the verdict (instance states can be long)."""


class BFCLEpisode:
    """Fresh backend instances for one entry, its tools, and the calls they executed."""

    def __init__(self, entry: Entry, ground_truth: list[list[str]], category: str) -> None:
        self.entry = entry
        self.ground_truth = ground_truth
        self.category = category
        self.namespace = bfcl_api.new_namespace()
        self.max_steps = bfcl_api.max_steps_per_turn()
        turns = len(entry["question"])
        self.calls: list[list[list[str]]] = [[] for _ in range(turns)]
        """Executed calls per user turn, per model step, as BFCL strings (checker input)."""
        self.steps: list[int] = [0] * turns
        """Model steps with tool calls per user turn (BFCL's step limit counts these)."""
        self._results: dict[str, str] = {}
        self._done: set[tuple[int, tuple[str, ...]]] = set()
        bfcl_api.import_backends(entry)
        # No calls: just creates this namespace's instances from the initial config.
        _, self.backends = bfcl_api.execute([], entry, self.namespace)
        self._names = {str(doc["name"]) for doc in entry["function"]}
        types = bfcl_api.type_map()
        self._tools = [self._tool(openai_function(doc, types)) for doc in entry["function"]]

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    def execute_step(self, calls: Sequence[tuple[str, Mapping[str, Any]]], turn: int) -> list[str]:
        """Runs one model step's calls in order and records them under `turn`; returns one
        result per call, as the model sees it."""
        while len(self.calls) <= turn:  # more user turns than BFCL has: keep them apart
            self.calls.append([])
            self.steps.append(0)
        results: list[str | None] = []
        runnable: list[str] = []
        for name, args in calls:
            refusal = self._refusal(name, args)
            if refusal is None:
                runnable.append(call_string(name, args))
            results.append(refusal)
        executed, _ = bfcl_api.execute(runnable, self.entry, self.namespace)
        outputs = iter(executed)
        self.steps[turn] += 1
        if runnable:
            self.calls[turn].append(runnable)
        return [r if r is not None else next(outputs) for r in results]

    def _refusal(self, name: str, args: Mapping[str, Any]) -> str | None:
        # Calls BFCL could only have failed on (unknown function, names that are not
        # identifiers) are answered with an error and not executed: they change no state,
        # and BFCL `eval`s call strings, so a made-up argument name could be code.
        if name not in self._names:
            return f"Error during execution: no function named {name!r}"
        if bad := unsafe_argument_names(args):
            return f"Error during execution: invalid argument name(s) {bad}"
        return None

    def _tool(self, function: dict[str, Any]) -> BaseTool:
        async def run(runtime: ToolRuntime[Any, Any], **_: Any) -> str:
            return self._result(runtime)

        return StructuredTool(
            name=function["name"],
            description=function["description"],
            args_schema=function["parameters"],  # BFCL's schema, sent to the model as is
            coroutine=run,
        )

    def _result(self, runtime: ToolRuntime[Any, Any]) -> str:
        """This call's result; the first call of a step to arrive runs the whole step.

        The step is the AI message that made the call (ToolNode runs its calls
        concurrently, but BFCL runs them in order), its turn the human messages before it.
        """
        call_id = runtime.tool_call_id or ""
        if call_id not in self._results:
            index, message = _step_of(call_id, runtime.state)
            calls = message.tool_calls
            key = (index, tuple(str(c["id"]) for c in calls))
            if key not in self._done:
                self._done.add(key)
                humans = sum(isinstance(m, HumanMessage) for m in _messages(runtime.state)[:index])
                turn = max(humans - 1, 0)
                outputs = self.execute_step([(c["name"], c["args"]) for c in calls], turn)
                self._results.update(zip((str(c["id"]) for c in calls), outputs, strict=True))
        return self._results[call_id]

    async def verify(self) -> Verdict:
        """BFCL's multi-turn checker on the recorded calls against the ground truth."""
        turns = len(self.ground_truth)
        calls = [[list(step) for step in turn] for turn in self.calls[:turns]]
        over = [i for i, n in enumerate(self.steps[:turns]) if n > self.max_steps]
        if over:
            # BFCL stops an entry after MAXIMUM_STEP_LIMIT steps in one turn and fails it.
            result: dict[str, Any] = {
                "valid": False,
                "error_type": "multi_turn:force_terminated",
                "error_message": f"more than {self.max_steps} steps in turn(s) {over}",
            }
        else:
            try:
                result = bfcl_api.check(calls, self.ground_truth, self.entry, self.category)
            except Exception as exc:  # the checker's own asserts: a verifier error
                return Verdict(
                    passed=False,
                    output=_report(calls, {}),
                    error=f"BFCL's multi_turn_checker raised {type(exc).__name__}: {exc}",
                )
        return Verdict(passed=bool(result.get("valid")), output=_report(calls, result))

    async def close(self) -> None:
        bfcl_api.purge(self.namespace)
        self.backends = {}


def _messages(state: Any) -> list[BaseMessage]:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not isinstance(messages, list):
        raise BFCLToolContextError(
            "BFCL tools need the conversation to know the user turn and the step: run them "
            "in a LangGraph ToolNode over a state with `messages` (as create_turnbon_agent "
            "does), or call BFCLEpisode.execute_step directly"
        )
    return messages


def _step_of(call_id: str, state: Any) -> tuple[int, AIMessage]:
    messages = _messages(state)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            return index, message
    raise BFCLToolContextError(
        f"no AI message in the state made tool call {call_id!r}; BFCL tools must run in a "
        "ToolNode on the message that called them"
    )


def _report(calls: list[list[list[str]]], result: Mapping[str, Any]) -> str:
    """The executed calls, the checker's details, and its answer last (the runner keeps
    the end of long outputs)."""
    details = {k: v for k, v in result.items() if k not in ("valid", "error_type", "error_message")}
    lines = [f"calls per turn and step: {json.dumps(calls)}"]
    if details:
        text = json.dumps(details, default=repr)
        if len(text) > DETAILS_LIMIT:
            text = text[:DETAILS_LIMIT] + "...(cut)"
        lines.append(f"checker details: {text}")
    if result.get("valid"):
        lines.append("checker: valid")
    elif result:
        lines.append(f"checker: {result.get('error_type')}: {result.get('error_message')}")
    return "\n".join(lines)
