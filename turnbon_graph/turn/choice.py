"""The select phase's choice among a turn's candidates.

No selector is asked when no candidate's tool calls parsed, when the candidates agree, or
when adaptive sampling committed; otherwise the selector answers a position in what it
was shown (each distinct action once, with `dedupe`), mapped back to the candidates. A
selector that rejects every candidate gets one fresh batch, then a fallback rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from langchain_core.messages import BaseMessage

from turnbon_graph.errors import AllCandidatesFailedError, ConfigurationError
from turnbon_graph.records import Usage
from turnbon_graph.selectors.base import Selection, Selector
from turnbon_graph.turn.candidates import Candidate, fallback_choice, group_by_action
from turnbon_graph.turn.state import GeneratedTurn

INVALID_TURN = "every candidate's tool-call arguments were invalid"
"""The `fallback` of a turn whose candidates all had unparseable tool-call arguments."""

Resample = Callable[[], Awaitable[GeneratedTurn]]
"""Generates a fresh batch of the turn's candidates (`TurnEngine.generate`, asked again)."""


async def choose(
    selector: Selector,
    transcript: Sequence[BaseMessage],
    turn: GeneratedTurn,
    *,
    dedupe: bool,
    resample: Resample,
) -> tuple[Selection, GeneratedTurn, Usage]:
    """The selection, the turn it was made in (a resample extends it), and what every
    selector call cost.

    Args:
        selector: asked when the candidates disagree.
        transcript: the messages the selector sees.
        turn: the turn's candidates.
        dedupe: show the selector each distinct action once, with its vote count.
        resample: makes the fresh batch after a rejection of every candidate.

    Returns:
        The selection (`index` a position in the turn's electable candidates), the turn,
            and the selector's usage.

    Raises:
        ConfigurationError: the selector answered a position outside what it was shown.
    """
    spent = Usage()
    while True:
        ok = turn.ok
        if not ok[0].valid:
            # No candidate's tool calls parsed: none can run, and no selector is asked.
            index, rule = fallback_choice(ok)
            why = f"{INVALID_TURN}; fell back to {rule}"
            return Selection(index=index, selector="invalid", fallback=why), turn, spent
        if len(group_by_action(ok)) == 1:
            # Every candidate proposes the same action: there is nothing to choose.
            label = "unanimous" if len(ok) > 1 else "single"
            return Selection(index=0, selector=label), turn, spent
        committed = turn.committed_position()
        if committed is not None:
            return Selection(index=committed, selector="agreement"), turn, spent
        selection = await ask_selector(selector, transcript, ok, dedupe=dedupe)
        spent = spent + selection.usage
        if not selection.none_acceptable:
            return selection, turn, spent
        problem = "the selector rejected every candidate"
        if not turn.rejected:  # one fresh batch, then fall back
            try:
                fresh = await resample()
            except AllCandidatesFailedError as exc:
                problem += f" and the resample failed ({exc.last_error})"
            else:
                turn = turn.resampled(fresh)
                continue
        else:
            problem += " twice"
        index, rule = fallback_choice(ok)
        fallback = selection.model_copy(
            update={
                "index": index,
                "none_acceptable": False,
                "message": None,
                "fallback": f"{problem}; fell back to {rule}",
            }
        )
        return fallback, turn, spent


async def ask_selector(
    selector: Selector, transcript: Sequence[BaseMessage], ok: list[Candidate], *, dedupe: bool
) -> Selection:
    """The selector's choice as a position in `ok`; with `dedupe`, the selector sees each
    distinct action once, with its vote count, and the answer is mapped back.

    Args:
        selector: the selector to ask.
        transcript: the messages it sees.
        ok: the electable candidates, in generation order.
        dedupe: show each distinct action once.

    Returns:
        Its selection, `index` and `scores` mapped back to positions in `ok`.

    Raises:
        ConfigurationError: the selector answered a position outside what it was shown.
    """
    groups = list(group_by_action(ok).values()) if dedupe else [[p] for p in range(len(ok))]
    shown = [dataclasses.replace(ok[g[0]], votes=len(g)) for g in groups]
    selection = await selector.select(transcript, shown)
    if not 0 <= selection.index < len(shown):
        raise ConfigurationError(
            f"selector {selector.name!r} returned index {selection.index}, "
            f"outside 0..{len(shown) - 1}; a Selector must return a position in the "
            "candidates it was given"
        )
    scores = selection.scores
    if scores is not None:
        by_position = {p: s for g, s in zip(groups, scores, strict=True) for p in g}
        scores = [by_position[p] for p in range(len(ok))]
    return selection.model_copy(update={"index": groups[selection.index][0], "scores": scores})
