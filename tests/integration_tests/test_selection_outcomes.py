"""What the engine does with a selector's answer beyond an index: rejecting every
candidate (one resample, then fallback), scores, and an action the selector wrote itself.

The selectors here are user-defined `Selector`s, the extension point users write too."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tests.helpers import generator_requests, stub_engine
from turnbon_graph import Candidate, TurnEngine, turn_record
from turnbon_graph.selectors import Selection
from turnbon_graph.testing import StubServer, chat_completion, error, tool_call

ASK = [HumanMessage("go")]


class ScriptedSelector:
    """Answers from a list of selections, one per call, recording what it was shown."""

    name = "scripted"

    def __init__(self, *answers: Selection) -> None:
        self.answers = list(answers)
        self.shown: list[list[int]] = []

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        self.shown.append([c.index for c in candidates])
        return self.answers[min(len(self.shown), len(self.answers)) - 1]


def engine(stub: StubServer, selector: ScriptedSelector, n: int = 3) -> TurnEngine:
    return stub_engine(stub, n=n, selector=selector)


def script_distinct(stub: StubServer) -> None:
    counter = iter(range(1000))
    stub.script(
        lambda _: chat_completion(
            tool_calls=[tool_call("shell", {"command": f"step {next(counter)}"})]
        )
    )


async def test_rejecting_every_candidate_resamples_once(stub: StubServer) -> None:
    script_distinct(stub)
    selector = ScriptedSelector(
        Selection(index=0, selector="scripted", none_acceptable=True),
        Selection(index=2, selector="scripted"),
    )
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None
    assert len(generator_requests(stub.requests)) == 6
    assert selector.shown == [[0, 1, 2], [3, 4, 5]]  # the fresh batch only
    assert record.resamples == 1 and record.n_requested == 6 and len(record.candidates) == 6
    assert record.selected_index == 5 and record.fallback is None


async def test_rejecting_twice_falls_back(stub: StubServer) -> None:
    script_distinct(stub)
    selector = ScriptedSelector(Selection(index=0, selector="scripted", none_acceptable=True))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None
    assert record.fallback == "the selector rejected every candidate twice; fell back to first"
    assert record.selected_index == 3  # the first of the fresh batch
    assert len(generator_requests(stub.requests)) == 6


async def test_a_failed_resample_falls_back_to_the_first_batch(stub: StubServer) -> None:
    counter = iter(range(1000))
    stub.script(
        *[
            chat_completion(tool_calls=[tool_call("shell", {"command": f"s{next(counter)}"})])
            for _ in range(3)
        ],
        error(400, "quota gone"),
    )
    selector = ScriptedSelector(Selection(index=0, selector="scripted", none_acceptable=True))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.fallback is not None
    assert "resample failed" in record.fallback and "quota gone" in record.fallback
    assert record.selected_index == 0 and record.resamples == 0


async def test_scores_are_recorded_by_candidate_index(stub: StubServer) -> None:
    counter = iter(range(1000))
    stub.script(
        error(400, "one bad call"),
        *[
            chat_completion(tool_calls=[tool_call("shell", {"command": f"s{next(counter)}"})])
            for _ in range(3)
        ],
    )
    selector = ScriptedSelector(Selection(index=1, selector="scripted", scores=[0.1, 0.9, 0.5]))
    # One call each, so the first candidate's call alone fails.
    engine_ = stub_engine(stub, n=4, selector=selector, max_concurrency=1, native_n=False)
    record = turn_record(await engine_.run(ASK))
    assert record is not None
    assert record.scores == [None, 0.1, 0.9, 0.5]
    assert record.selected_index == 2


async def test_a_written_action_is_executed_and_recorded(stub: StubServer) -> None:
    script_distinct(stub)
    fused = AIMessage("", tool_calls=[{"name": "shell", "args": {"command": "fused"}, "id": "f1"}])
    selector = ScriptedSelector(Selection(index=1, selector="scripted", message=fused))
    message = await engine(stub, selector).run(ASK)
    assert message.tool_calls[0]["args"] == {"command": "fused"}
    record = turn_record(message)
    assert record is not None and record.selected_index == 1
    assert record.synthesized == {
        "content": "",
        "tool_calls": [{"name": "shell", "args": {"command": "fused"}, "id": "f1"}],
    }
