"""Small builders shared by the tests (no test logic, no mocks of our code)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from turnbon_graph.bench.running.runs import EPISODES_FILE, EpisodeResult, read_lines
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)
from turnbon_graph.turn.candidates import Candidate
from turnbon_graph.turn.engine import TurnEngine
from turnbon_graph.turn.generator import ModelPool


def candidate(index: int, command: str | None = None, *, text: str = "", **kw: Any) -> Candidate:
    """A successful candidate that runs `command` in a `shell` tool (or answers `text`)."""
    calls = [{"name": "shell", "args": {"command": command}, "id": f"c{index}"}] if command else []
    return Candidate(
        index=index, model="m", message=AIMessage(content=text, tool_calls=calls, **kw)
    )


def runs_once(command: str) -> Callable[[CapturedRequest], dict[str, Any]]:
    """A stub model that runs `command` as its one `shell` call, then, once it has seen
    the output, says it is done."""

    def reply(request: CapturedRequest) -> dict[str, Any]:
        if any(m.get("role") == "tool" for m in request.body["messages"]):
            return chat_completion("done")
        return chat_completion(None, [tool_call("shell", {"command": command})])

    return reply


def selector_answer(index: int, reason: str = "scripted") -> dict[str, Any]:
    return chat_completion(json.dumps({"reason": reason, "selected_index": index}))


def generator_requests(requests: list[CapturedRequest]) -> list[CapturedRequest]:
    return [r for r in requests if not is_selector_request(r)]


def selector_requests(requests: list[CapturedRequest]) -> list[CapturedRequest]:
    return [r for r in requests if is_selector_request(r)]


def stub_kwargs(base_url: str, api_key: str = "sk-test-key") -> dict[str, Any]:
    return {"api_base": base_url, "api_key": api_key}


def stub_engine(stub: StubServer, model: ModelPool = "openai/stub", **options: Any) -> TurnEngine:
    """The tests' one engine factory: a `TurnEngine` on `stub`, its endpoint merged into
    `completion_kwargs`, every other turn option as given."""
    kwargs = {**stub_kwargs(stub.base_url), **(options.pop("completion_kwargs", None) or {})}
    return TurnEngine.from_options(model, completion_kwargs=kwargs, **options)


def requests_in_flight(stub: StubServer, delay: float) -> int:
    """The most requests the stub held at once, when each took `delay` to answer: at each
    arrival, those that arrived earlier and cannot have been answered yet."""
    arrivals = sorted(r.received_at for r in stub.requests)
    return max(sum(1 for s in arrivals if s <= t < s + delay) for t in arrivals)


def episode_lines(run: Path) -> list[EpisodeResult]:
    """Every line of a run's episodes file, an episode recorded twice twice
    (`read_episodes` counts only an episode's latest line)."""
    return read_lines(run / EPISODES_FILE, EpisodeResult)


def terminate(process: subprocess.Popen[str]) -> int:
    """Ends a server process as an operator would (SIGTERM, then SIGKILL after a minute)
    and waits for it: its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def default_sigint() -> None:
    """A child process's `preexec_fn`: SIGINT back to its default, so the child's Python
    installs its KeyboardInterrupt handler as a terminal's would. A test runner's worker
    may ignore SIGINT, and an ignored signal stays ignored across exec: Ctrl-C would
    never reach the command under test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def strategy_rows(
    setting: str, passes: list[int], budget: int | None, name: str = "beam", spent: float = 0
) -> list[EpisodeResult]:
    """One episode of `setting` per task, passing where `passes` says, each a search of
    strategy `name` at `budget` that spent `spent`."""
    from turnbon_graph.bench.strategies.record import SearchRecord
    from turnbon_graph.bench.strategies.spec import StrategySpec

    spec = StrategySpec(name=name, token_budget=budget)
    return [
        EpisodeResult(
            task=f"t{k}",
            trial=0,
            setting=setting,
            n=2,
            outcome="pass" if passed else "wrong_submission",
            turns=1,
            duration_s=1.0,
            strategy=spec,
            search=SearchRecord(spent=spent),
        )
        for k, passed in enumerate(passes)
    ]
