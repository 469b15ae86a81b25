from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from tests.helpers import candidate
from turnbon_graph.turn.candidates import (
    Candidate,
    agreement,
    canonical_action,
    group_by_action,
    plurality_position,
)


def test_canonical_action_ignores_call_ids_and_argument_order() -> None:
    a = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1, "y": [2, 3]}, "id": "a"}])
    b = AIMessage("", tool_calls=[{"name": "f", "args": {"y": [2, 3], "x": 1}, "id": "b"}])
    assert canonical_action(a) == canonical_action(b)


def test_canonical_action_distinguishes_arguments_and_tools() -> None:
    base = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "a"}])
    other_args = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 2}, "id": "a"}])
    other_tool = AIMessage("", tool_calls=[{"name": "g", "args": {"x": 1}, "id": "a"}])
    assert len({canonical_action(m) for m in (base, other_args, other_tool)}) == 3


def test_final_answers_compare_by_normalised_text() -> None:
    assert canonical_action(AIMessage("Done.\n\n  All good")) == canonical_action(
        AIMessage("Done. All good")
    )
    assert canonical_action(AIMessage("Done.")) != canonical_action(AIMessage("Not done."))
    # A tool call and the same text as a final answer are different actions.
    with_call = AIMessage("ls", tool_calls=[{"name": "shell", "args": {}, "id": "a"}])
    assert canonical_action(with_call) != canonical_action(AIMessage("ls"))


def test_grouping_agreement_and_plurality_skip_failures() -> None:
    pool = [
        candidate(0, "ls"),
        Candidate(index=1, model="m", error="boom"),
        candidate(2, "pwd"),
        candidate(3, "pwd"),
        candidate(4, "ls -la"),
    ]
    groups = group_by_action(pool)
    assert list(groups.values()) == [[0], [2, 3], [4]]
    assert agreement(pool) == pytest.approx(2 / 4)
    assert plurality_position(pool) == 2


def test_plurality_ties_go_to_the_earliest() -> None:
    pool = [candidate(0, "b"), candidate(1, "a"), candidate(2, "a"), candidate(3, "b")]
    assert plurality_position(pool) == 0


def test_failed_candidate_has_no_action() -> None:
    with pytest.raises(ValueError, match="boom"):
        _ = Candidate(index=0, model="m", error="boom").action
    assert agreement([Candidate(index=0, model="m", error="boom")]) == 0.0
    with pytest.raises(ValueError):
        plurality_position([])


def test_ignored_arguments_do_not_split_actions() -> None:
    a = AIMessage(
        "", tool_calls=[{"name": "sh", "args": {"cmd": "make", "timeout": 30}, "id": "a"}]
    )
    b = AIMessage(
        "", tool_calls=[{"name": "sh", "args": {"cmd": "make", "timeout": 60}, "id": "b"}]
    )
    assert canonical_action(a) != canonical_action(b)
    assert canonical_action(a, ["timeout"]) == canonical_action(b, ["timeout"])


def test_votes_weigh_in_plurality_and_agreement() -> None:
    pool = [candidate(0, "a"), candidate(1, "b"), candidate(2, "c")]
    pool[2].votes = 3
    assert plurality_position(pool) == 2
    assert agreement(pool) == pytest.approx(3 / 5)
