"""Who can play a bench episode, by name (`--agent`): Turn-BoN, or a reference agent
that checks a task set without a model (`bench.reference`). Only the standard library:
the command line's flags read it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

ReferenceAgent = Literal["oracle", "nop"]
REFERENCE_AGENTS: tuple[ReferenceAgent, ...] = ("oracle", "nop")
"""`oracle` runs each task's own solution; `nop` does nothing."""
AGENTS = ("turnbon", *REFERENCE_AGENTS)
"""`--agent`'s choices: Turn-BoN (the default) first."""


def is_reference(agent: str) -> bool:
    """Whether `agent` is a reference agent (no model, no tokens)."""
    return agent in REFERENCE_AGENTS


def as_expected(outcome: str | None, agent: str) -> bool:
    """Whether a reference agent's episode ended as it does on a sound task: the oracle
    passes, nop gets a verdict of fail (any other ending is the task's or the harness's
    problem: an error, a time limit)."""
    return outcome == ("pass" if agent == "oracle" else "wrong_submission")


def unsound_tasks(results: Iterable[Any], agent: str) -> dict[str, list[Any]]:
    """The tasks where some episode of `agent` did not end `as_expected`, each with
    those episodes (`EpisodeResult`s), in task order."""
    wrong: dict[str, list[Any]] = {}
    for row in results:
        if not as_expected(row.outcome, agent):
            wrong.setdefault(row.task, []).append(row)
    return dict(sorted(wrong.items()))


def sound_ending(agent: str) -> str:
    """What a sound task does under `agent`, in words."""
    return "passes" if agent == "oracle" else "fails"
