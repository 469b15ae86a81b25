"""A scripted, oracle-ish stand-in for a model, for `turnbon bench --model stub`.

As a generator it recognises the task from the first user message and proposes, at
random: the task's reference solution (solve.sh as one `shell` call), an inspection
(`ls -la`, `cat <file>`, `env | sort`), or a premature "done" that gives up. After the
solution ran it answers "done". As a selector it picks the candidate that runs the
solution when one is shown, else the first. So one sample (N=1) gives up before solving
more often than the best of four (N=4): the benchmark pipeline runs end to end without a
model and shows a real difference between the settings. Asked to think step by step (the
`escalate` strategy's prompt variant, `strategies.escalate.STEP_BY_STEP`), it never gives
up before the solution ran: the give-up share of its draws goes to the solution.

As the value model of a search strategy (`turnbon_graph.bench.values.value`) it scores a
partial trajectory by where it is on the solution path: `VALUE_DONE` once the solution
ran and the agent said so, `VALUE_SOLVED` once it ran, `VALUE_GAVE_UP` for an answer
given without it, `VALUE_LOOKING` while the agent only looked around. So beam search
keeps the branch that ran the solution, and particle filtering draws it most often.
Asked to write the action (the fusion and refine selectors), it writes out the one it
would pick.

Draws are seeded by `seed` and the request's own `seed` (the OpenAI parameter, which
`turnbon bench` gives every generator call of an episode: `turnbon_graph.bench.draws`),
so a request asking for `n` candidates gets `n` draws, as from `n` requests, the same
request draws the same numbers in every setting, and an episode's draws depend on its
own calls alone: on neither the other settings of its run nor the order in which
requests arrive. A request without a seed is seeded by what it asks
(`bench.draws.request_key`: the messages and actions so far, not the tool outputs,
whose timestamps, sandbox paths and uids differ from run to run, nor call ids) and how
many times that was asked, so the N identical requests of one turn still differ (then
concurrent episodes of one task draw from one counter in the order their requests
arrive). When no candidate runs the solution
the selector picks by a seeded hash of the actions, not by position, so the order in
which a turn's N answers arrive changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import shlex
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from turnbon_terminal.task.folders import SETUP_SCRIPT, TerminalTask, read_task_text

if TYPE_CHECKING:
    from turnbon_graph.testing import CapturedRequest

DONE = "Done: the task's solution ran."
GIVE_UP = "I looked around and believe nothing more is needed."
_BLOCK = re.compile(r'<candidate index="(\d+)"[^>]*>\n(.*?)\n</candidate>', re.DOTALL)
_TRANSCRIPT = re.compile(r"<transcript>\n(.*?)\n</transcript>", re.DOTALL)
VALUE_DONE, VALUE_SOLVED, VALUE_LOOKING, VALUE_GAVE_UP = 10.0, 8.0, 3.0, 1.0
ANSWER_TOKENS = 7
"""Completion tokens of every answer (a candidate, a selector's pick, a value)."""
CHARS_PER_TOKEN = 4
"""Characters of a request's JSON billed as one prompt token."""


@runtime_checkable
class HasTerminalTasks(Protocol):
    """What holds terminal tasks, such as a `TerminalEnvironment`."""

    def terminal_tasks(self) -> Sequence[TerminalTask]:
        """The tasks it holds.

        Returns:
            The tasks, with their folders (reference solutions included).
        """
        ...


class StubPolicy:
    """Callable responder for `StubServer.script(...)`; see the module docstring.

    Args:
        tasks: the tasks it recognises; one without a reference solution is left out.
        p_solve: the share of draws that run the task's solution.
        p_inspect: the share of draws that inspect (`ls -la`, `cat <file>`, ...); the
            rest give up ("done" before the solution ran).
        seed: seeds the draws.

    Raises:
        ValueError: `p_solve` and `p_inspect` are not probabilities summing to at
            most 1.
    """

    def __init__(
        self,
        tasks: Iterable[TerminalTask],
        *,
        p_solve: float = 0.4,
        p_inspect: float = 0.35,
        seed: int = 0,
    ) -> None:
        if not (0 <= p_solve <= 1 and 0 <= p_inspect <= 1 and p_solve + p_inspect <= 1):
            raise ValueError("p_solve and p_inspect must be probabilities summing to <= 1")
        self.p_solve = p_solve
        self.p_inspect = p_inspect
        self.seed = seed
        self._tasks: list[tuple[str, TerminalTask, str]] = []
        for task in tasks:
            if task.solution_script is not None:
                solution = read_task_text(task.solution_script)
                self._tasks.append((task.instruction_text, task, solution))
        # Longest instruction first: one that contains another still matches itself.
        self._tasks.sort(key=lambda item: len(item[0]), reverse=True)
        self.solutions = {solution for _, _, solution in self._tasks}
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()  # the stub server answers from its own thread

    def __call__(self, request: CapturedRequest) -> dict[str, Any]:
        from turnbon_graph.bench.values.value import is_value_request
        from turnbon_graph.testing import is_selector_request

        body = request.body or {}
        messages = body.get("messages") or []
        if is_value_request(messages):
            reply = self._value(messages)
        elif is_selector_request(request):
            reply = self._select(messages)
        else:
            reply = self._generate(messages, int(body.get("n") or 1), body.get("seed"))
        return billed(reply, body)

    # ------------------------------------------------------------------ generator

    def _generate(
        self, messages: list[dict[str, Any]], n: int, seed: int | None = None
    ) -> dict[str, Any]:
        """`n` independent draws in one reply, as an endpoint honouring `n` gives them
        (billed once for the prompt, each choice's answer added: `billed`)."""
        from turnbon_graph.testing import chat_completion, choice

        choices = [
            choice(*self._draw(messages, self._rng(messages, seed, k)), index=k) for k in range(n)
        ]
        return chat_completion(choices=choices)

    def _draw(
        self, messages: list[dict[str, Any]], rng: random.Random
    ) -> tuple[str | None, list[Any] | None]:
        """One candidate: (content, tool calls)."""
        from turnbon_graph.bench.strategies.escalate import is_step_by_step_request
        from turnbon_graph.testing import tool_call

        found = self._task_of(messages)
        if found is None:
            return "I do not recognise this task.", None
        task, solution = found
        if solution in _commands_run(messages):
            return DONE, None
        draw = rng.random()
        p_solve = 1 - self.p_inspect if is_step_by_step_request(messages) else self.p_solve
        if draw < p_solve:
            command = solution
        elif draw < p_solve + self.p_inspect:
            command = rng.choice(_inspections(task))
        else:
            return GIVE_UP, None
        return None, [tool_call("shell", {"command": command})]

    def _task_of(self, messages: list[dict[str, Any]]) -> tuple[TerminalTask, str] | None:
        first = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        for instruction, task, solution in self._tasks:
            if instruction in first:
                return task, solution
        return None

    def _rng(self, messages: list[dict[str, Any]], seed: int | None, k: int) -> random.Random:
        """The draws of the request's `k`-th choice."""
        from turnbon_graph.bench.draws import request_key

        if seed is not None:  # the call's own numbers (`bench.draws`)
            return random.Random(f"{self.seed}|{seed}|{k}")
        digest = request_key(messages)
        with self._lock:
            count = self._seen.get(digest, 0)
            self._seen[digest] = count + 1
        return random.Random(f"{self.seed}|{digest}|{count}")

    # ------------------------------------------------------------------ selector

    def _select(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from turnbon_graph.testing import chat_completion

        shown = _text(messages[-1].get("content")) if messages else ""
        choice, reason = 0, "no candidate runs the reference solution; taking the first"
        ranked: list[tuple[str, int]] = []
        actions: dict[int, dict[str, Any]] = {}
        for index, body in _BLOCK.findall(shown):
            try:
                action = actions[int(index)] = json.loads(body)
            except ValueError:
                continue
            calls = action.get("tool_calls") or []
            if any(c.get("args", {}).get("command") in self.solutions for c in calls):
                choice, reason = int(index), "it runs the reference solution"
                break
            ranked.append((self._rank(action), int(index)))
        else:
            if ranked:  # by the actions, not their places: the same pick in any order
                choice = min(ranked)[1]
                reason = "no candidate runs the reference solution; taking a seeded pick"
        # The pick's own action too: what a selector that writes the action (fusion,
        # refine) reads, the same pick written out unchanged.
        picked = actions.get(choice, {})
        written = {
            "content": picked.get("content") or "",
            "tool_calls": picked.get("tool_calls") or [],
        }
        return chat_completion(json.dumps({"reason": reason, "selected_index": choice, **written}))

    # ------------------------------------------------------------------ value model

    def _value(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """A scripted score of the trajectory shown: how far along the solution path."""
        from turnbon_graph.testing import chat_completion

        found = _TRANSCRIPT.search(_text(messages[-1].get("content")) if messages else "")
        actions = []
        for line in found.group(1).splitlines() if found else []:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("role") == "ai":
                actions.append(
                    [c.get("args", {}).get("command") for c in entry.get("tool_calls") or []]
                )
        solved = any(command in self.solutions for calls in actions for command in calls)
        answered = bool(actions) and not actions[-1]
        if solved:
            score, reason = (
                (VALUE_DONE, "solved, and said so")
                if answered
                else (
                    VALUE_SOLVED,
                    "it ran the reference solution",
                )
            )
        elif answered:
            score, reason = VALUE_GAVE_UP, "it answered without running the solution"
        else:
            score, reason = VALUE_LOOKING, "it has only looked around so far"
        return chat_completion(json.dumps({"reason": reason, "score": score}))

    def _rank(self, action: dict[str, Any]) -> str:
        calls = [(c.get("name"), c.get("args")) for c in action.get("tool_calls") or []]
        key = json.dumps([action.get("content"), calls], sort_keys=True, default=str)
        return hashlib.sha256(f"{self.seed}|{key}".encode()).hexdigest()


def billed(reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """`reply` as a model bills it: the prompt counted from the request (a token per
    `CHARS_PER_TOKEN` characters of its messages and tools, once for all its choices),
    each choice `ANSWER_TOKENS`; a `max_tokens` below that cuts the answer off there
    (finish reason `length`, its text and tool calls lost), so a budget's clamp binds.

    Args:
        reply: a chat.completion body of the policy's choices.
        body: the request it answers.

    Returns:
        `reply`, cut where the request's cap says, with its usage.
    """
    from turnbon_graph.bench.metering.budget import request_chars

    prompt = math.ceil(
        request_chars(body.get("messages") or [], body.get("tools")) / CHARS_PER_TOKEN
    )
    caps = [body.get(key) for key in ("max_tokens", "max_completion_tokens")]
    cap = min((int(c) for c in caps if c is not None), default=ANSWER_TOKENS)
    completion = 0
    for entry in reply["choices"]:
        if cap < ANSWER_TOKENS:
            entry["message"]["content"] = ""
            entry["message"].pop("tool_calls", None)
            entry["finish_reason"] = "length"
        completion += min(cap, ANSWER_TOKENS)
    reply["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return reply


def stub_policy(
    tasks: Iterable[TerminalTask] | HasTerminalTasks,
    *,
    p_solve: float = 0.4,
    p_inspect: float = 0.35,
    seed: int = 0,
) -> Callable[[CapturedRequest], dict[str, Any]]:
    """A responder for `turnbon_graph.testing.StubServer.script(...)` playing generator
    and selector on `tasks` (TerminalTasks, or a TerminalEnvironment's).

    Args:
        tasks: the tasks, or what holds them (a `TerminalEnvironment`).
        p_solve: the share of draws that run the task's solution.
        p_inspect: the share of draws that inspect; the rest give up.
        seed: seeds the draws.

    Returns:
        The responder (a `StubPolicy`).

    Raises:
        ValueError: `p_solve` and `p_inspect` are not probabilities summing to at
            most 1.
    """
    items = tasks.terminal_tasks() if isinstance(tasks, HasTerminalTasks) else tasks
    return StubPolicy(items, p_solve=p_solve, p_inspect=p_inspect, seed=seed)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append((str(function.get("name")), str(function.get("arguments"))))
    return calls


def _commands_run(messages: list[dict[str, Any]]) -> set[str]:
    """Commands of every shell call the assistant made (and so ran) so far."""
    commands = set()
    for message in messages:
        for name, arguments in _calls(message):
            try:
                command = json.loads(arguments).get("command")
            except (ValueError, AttributeError):
                continue
            if name == "shell" and isinstance(command, str):
                commands.add(command)
    return commands


def _inspections(task: TerminalTask) -> list[str]:
    """Harmless looks around: the listing, the environment (a leak would show in the
    run folder) and a few of the task's files."""
    commands = ["ls -la", "env | sort"]
    folder = task.environment_dir
    if folder.is_dir():
        files = sorted(
            p.relative_to(folder)
            for p in folder.rglob("*")
            if p.is_file() and p.name != SETUP_SCRIPT and p.stat().st_size < 4096
        )
        commands += [f"cat {shlex.quote(str(f))}" for f in files[:3]]
    return commands
