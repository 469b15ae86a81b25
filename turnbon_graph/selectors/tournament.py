"""Pairwise tournament: candidates meet two at a time, each pair judged in both orders.

Single elimination, not round robin: N-1 matches (2(N-1) calls) against N(N-1), in
about log2(N) rounds whose matches run concurrently. Asking each pair in both orders
cancels the judge's position bias: a pair the two orders disagree on is a tie.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.records import Usage
from turnbon_graph.selectors.base import Selection, fall_back
from turnbon_graph.selectors.llm import NONE_ACCEPTABLE, LLMSelector, as_llm_selector
from turnbon_graph.selectors.model_call import Asked, gather_all
from turnbon_graph.turn.candidates import Candidate

NEITHER = "none"
"""A vote that neither candidate of a pair is acceptable (with `allow_none`)."""


@dataclass
class Match:
    """One pair, by position in the candidates; votes per order, by candidate index."""

    first: int
    second: int
    votes: list[int | str | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    winner: int | None = None
    """Position of the winner; None when the pair was rejected (or it is a bye's None)."""

    def to_json(self, candidates: Sequence[Candidate]) -> dict[str, Any]:
        return {
            "pair": [candidates[self.first].index, candidates[self.second].index],
            "votes": self.votes,
            "winner": None if self.winner is None else candidates[self.winner].index,
            "errors": self.errors,
        }


class TournamentSelector:
    """A single-elimination tournament of pairwise comparisons (SWE-agent style).

    Each pair is asked of the `judge` (an `LLMSelector` shown two candidates, unshuffled)
    in both orders, concurrently. The pair's winner is the candidate with more votes: a
    pair the two orders disagree on is a tie, and so is one with no usable vote; a tie
    goes to the candidate proposed by more generated candidates, then to the earlier one.
    An order whose call failed or answered unusably twice casts no vote, so a single
    usable order decides. The bracket is in generation order; an odd one out gets a bye.

    With `allow_none` the judge may also answer that neither is acceptable: a pair whose
    every usable vote says so is eliminated, and a tournament with no survivor rejects
    every candidate. If no comparison at all could be had it falls back to majority/first.
    The matches go to `answer` as JSON (candidate indices); usage sums every call.

    Args:
        judge: a LiteLLM model id (an `LLMSelector` is made on it), or a ready
            `LLMSelector` (then set the options below on it instead).
        completion_kwargs: settings for the judge's calls.
        client: the judge made here from a model id calls through it. A graph binds a
            judge that has no client of its own to the graph's client (`bind_client`).
        response_format: as for `LLMSelector`.
        allow_none: the judge may answer that neither candidate of a pair is acceptable.

    Raises:
        ConfigurationError: judge options are given with a ready `LLMSelector`, or the
            judge cannot be made (as `LLMSelector` raises).
    """

    def __init__(
        self,
        judge: str | LLMSelector,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        client: LiteLLMClient | None = None,
        response_format: bool | None = None,
        allow_none: bool = False,
    ) -> None:
        self.judge = as_llm_selector(
            judge,
            owner="TournamentSelector",
            completion_kwargs=completion_kwargs,
            client=client,
            response_format=response_format,
            allow_none=allow_none,
            shuffle=False,  # the tournament sets the order: both of them
        )

    def bind_client(self, client: LiteLLMClient) -> None:
        """Binds the judge to `client`, unless it was given a client of its own.

        Args:
            client: the graph's client, whose limits then bound the judge's calls.
        """
        self.judge.bind_client(client)

    @property
    def name(self) -> str:
        """`tournament:<judge's model>`."""
        return f"tournament:{self.judge.model}"

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Runs the bracket, round by round.

        Args:
            messages: the transcript every comparison shows the judge.
            candidates: paired in generation order; an odd one out goes through.

        Returns:
            The champion; every candidate rejected when no candidate survived; the
                majority or the first, with `fallback`, when no comparison could be made.
        """
        alive = list(range(len(candidates)))
        rounds: list[list[Match]] = []
        usage = Usage()
        while len(alive) > 1:
            matches = [Match(a, b) for a, b in zip(alive[::2], alive[1::2], strict=False)]
            asked = await gather_all(
                [
                    self.judge.ask(messages, [candidates[x], candidates[y]])
                    for m in matches
                    for x, y in ((m.first, m.second), (m.second, m.first))
                ]
            )
            usage = sum((a.usage for a in asked), usage)
            for i, match in enumerate(matches):
                self._decide(match, asked[2 * i : 2 * i + 2], candidates)
            rounds.append(matches)
            bye = [alive[-1]] if len(alive) % 2 else []
            alive = [m.winner for m in matches if m.winner is not None] + bye
        answer = json.dumps(
            {
                "rounds": [[m.to_json(candidates) for m in r] for r in rounds],
                "champion": candidates[alive[0]].index if alive else None,
            }
        )
        common: dict[str, Any] = {"selector": self.name, "answer": answer, "usage": usage}
        matches = [m for r in rounds for m in r]
        if all(v is None for m in matches for v in m.votes):
            why = f"no comparison could be made ({matches[0].errors[0]})"
            return fall_back(candidates, why, **common)
        if not alive:
            return Selection(index=0, none_acceptable=True, **common)
        return Selection(index=alive[0], **common)

    @staticmethod
    def _decide(match: Match, asked: Sequence[Asked[int]], candidates: Sequence[Candidate]) -> None:
        """Tallies the two orders' votes and sets the winner (None: both eliminated)."""
        shown = ((match.first, match.second), (match.second, match.first))
        support = {match.first: 0, match.second: 0}
        neither = 0
        for order, result in zip(shown, asked, strict=True):
            if result.value is None:
                match.votes.append(None)
                match.errors.append(result.error or "no answer")
            elif result.value == NONE_ACCEPTABLE:
                match.votes.append(NEITHER)
                neither += 1
            else:
                position = order[result.value]
                support[position] += 1
                match.votes.append(candidates[position].index)
        a, b = support[match.first], support[match.second]
        if a != b:
            match.winner = match.first if a > b else match.second
        elif a == 0 and neither:
            match.winner = None  # every usable vote rejected both
        else:
            # A tie: more generated candidates behind it, then the earlier one.
            match.winner = max(match.first, match.second, key=lambda p: (candidates[p].votes, -p))
