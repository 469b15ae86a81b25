"""Environment factories for `turnbon bench` tests, as an integration would register them
under the `turnbon.environments` entry-point group, and a stub policy that plays a model
which is right only sometimes (so selecting among N candidates helps)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.counter_env import CounterEnvironment
from tests.judges import shown_actions, user_prompt
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)

BROKEN = 99
"""A target the policy answers with an error: every attempt at it is an agent error."""
HOLD_S = 30.0
"""How long an answer waits once a `hold=K` run is past its first K episodes: far longer
than a test takes to see the first episode saved and send its signal, and short enough
that a stop which waits for the answer still ends within the test's time."""
SELECTOR_USAGE = {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220}


class SometimesRight:
    """The generator's first move of an episode brings the counter to its target on every
    `every`-th first move of the run (else one short, a wrong submission); then it says
    done. The selector picks a shown candidate that reaches the target, else the first.

    Counting moves rather than drawing random ones keeps a run with one episode at a time
    deterministic: N candidates of a turn are N consecutive moves."""

    def __init__(self, every: int = 4, delay: float = 0.0, hold_after: int | None = None) -> None:
        self.every = every
        self.delay = delay
        self.hold_after = hold_after
        self.first_moves = 0

    def __call__(self, request: CapturedRequest) -> StubResponse:
        answer = self._answer(request)
        delay = self.delay
        if self.hold_after is not None and self.first_moves > self.hold_after:
            # Past the held episodes every answer waits HOLD_S: the run stays inside the
            # next episode until it is stopped, however slowly the machine schedules it.
            delay = HOLD_S
        if isinstance(answer, StubResponse):
            answer.delay = delay
            return answer
        return StubResponse(body=answer, delay=delay)

    def _answer(self, request: CapturedRequest) -> dict[str, Any] | StubResponse:
        if is_selector_request(request):
            target = _target(user_prompt(request))
            actions = shown_actions(request)
            right = [
                i
                for i, action in enumerate(actions)
                if action.get("tool_calls") and action["tool_calls"][0]["args"]["by"] == target
            ]
            answer = {"reason": "reaches the target", "selected_index": right[0] if right else 0}
            return chat_completion(json.dumps(answer), usage=SELECTOR_USAGE)
        messages = (request.body or {})["messages"]
        target = _target(str(messages[0]["content"]))
        if target == BROKEN:
            return error(400, "this task always fails")
        if any(m["role"] == "tool" for m in messages):
            return chat_completion("done")
        move = self.first_moves
        self.first_moves += 1
        by = target if move % self.every == 0 else target - 1
        return chat_completion(tool_calls=[tool_call("increment", {"by": by})])


def _target(text: str) -> int:
    found = re.search(r"Bring the counter to (\d+)", text)
    assert found, f"no target in {text[:200]!r}"
    return int(found.group(1))


class StubbedCounter(CounterEnvironment):
    """The counter environment with its own stub policy, for `--model stub`."""

    def __init__(
        self, targets: dict[str, int], delay: float = 0.0, hold_after: int | None = None
    ) -> None:
        super().__init__(targets)
        self.delay = delay
        self.hold_after = hold_after

    def stub_policy(self) -> SometimesRight:
        return SometimesRight(delay=self.delay, hold_after=self.hold_after)


def parse_spec(spec: str | None) -> tuple[dict[str, int], dict[str, float]]:
    """`a=3,b=5;delay=0.2;hold=1` -> ({"a": 3, "b": 5}, {"delay": 0.2, "hold": 1.0});
    None -> two tasks, no options. `delay` is each answer's wait in seconds; with `hold=K`
    (one episode at a time, N=1) the answers of every episode after the first K wait
    `HOLD_S`, so a test can stop the run inside an episode."""
    if not spec:
        return {"three": 3, "five": 5}, {}
    tasks, *options = spec.split(";")
    targets = {k: int(v) for k, v in (item.split("=") for item in tasks.split(","))}
    settings = {k: float(v) for k, v in (option.split("=") for option in options)}
    return targets, settings


def counter(spec: str | None) -> StubbedCounter:
    targets, options = parse_spec(spec)
    hold = options.get("hold")
    return StubbedCounter(targets, options.get("delay", 0.0), None if hold is None else int(hold))


def counter_without_stub(spec: str | None) -> CounterEnvironment:
    return CounterEnvironment(parse_spec(spec)[0])


def counter_with_follow_up(spec: str | None) -> CounterEnvironment:
    """Each task then asks the agent to confirm: a second user message."""
    return CounterEnvironment(parse_spec(spec)[0], follow_ups=["Now confirm."])


def hasty_counter(spec: str | None) -> CounterEnvironment:
    """The agent has a third of a second for each task."""
    return CounterEnvironment(parse_spec(spec)[0], agent_timeout_s=0.3)


def not_an_environment(spec: str | None) -> object:
    return object()
