"""BFCL entries as the runner's tasks: the first user turn, then the others as follow-ups."""

from __future__ import annotations

from turnbon_bfcl.bfcl_api import Entry
from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.errors import ConfigurationError


def user_turns(entry: Entry) -> list[str]:
    """The text of each user turn. In BFCL a turn is a list of messages; multi_turn_base
    has exactly one user message per turn (the "missed function" categories have empty
    turns that add functions instead, which are not supported)."""
    turns: list[str] = []
    for index, messages in enumerate(entry["question"]):
        if len(messages) != 1 or messages[0].get("role") != "user":
            raise ConfigurationError(
                f"{entry['id']}: turn {index} is not one user message ({messages!r}); "
                "only multi_turn_base entries are supported"
            )
        turns.append(str(messages[0]["content"]))
    return turns


def task_spec(entry: Entry, category: str, max_steps: int) -> TaskSpec:
    """A BFCL entry as a task: its first user turn the instruction, the others follow-ups, and
    one step over BFCL's limit per turn."""
    first, *rest = user_turns(entry)
    return TaskSpec(
        id=str(entry["id"]),
        instruction=first,
        follow_ups=rest,
        # BFCL force-terminates a turn after its step limit; one step more lets the
        # episode see that happen (and fail the entry as BFCL does).
        max_turns=max_steps + 1,
        category=category,
        metadata={
            "involved_classes": list(entry["involved_classes"]),
            "turns": len(rest) + 1,
        },
    )
