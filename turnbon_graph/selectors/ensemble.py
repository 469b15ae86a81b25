"""Ensemble: k selector calls over different candidate orders (and models), then a vote.

Each call sees the candidates in a different rotation of one seeded shuffle, so every
candidate is shown in k different positions (for k <= N) and the judge's position bias
spreads over all of them instead of favouring one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage
from turnbon_graph.selectors.base import Selection, fall_back
from turnbon_graph.selectors.llm import NONE_ACCEPTABLE, LLMSelector, as_llm_selector
from turnbon_graph.selectors.model_call import gather_all
from turnbon_graph.selectors.prompting import seeded_order
from turnbon_graph.turn.candidates import Candidate


class EnsembleSelector:
    """k concurrent `LLMSelector` calls, each with its own candidate order, then majority.

    `judges`: a model id, an `LLMSelector`, or a list of them: call i asks
    `judges[i % len(judges)]`. Call i shows the candidates in a seeded shuffle rotated by
    i. Votes map back to candidates; the most-voted candidate wins, ties go to the
    earliest. With `allow_none` a judge may reject every candidate; that happens only if
    rejections outnumber the votes of every single candidate. Calls that fail or answer
    unusably twice do not vote; if none votes it falls back to majority/first. The votes
    go to `answer` as JSON; usage sums every call.

    Args:
        judges: a model id, an `LLMSelector`, or a list of them: call i asks
            `judges[i % len(judges)]`.
        k: how many calls vote.
        completion_kwargs: settings for the calls of the judges made here.
        client: the judges made here from model ids call through it. A graph binds every
            judge that has no client of its own to the graph's client (`bind_client`).
        seed: seeds the shuffle the calls' orders are rotations of.
        response_format: as for `LLMSelector`.
        allow_none: a judge may reject every candidate.

    Raises:
        ConfigurationError: `k` is not a whole number >= 1, there is no judge, or judge
            options are given with a ready `LLMSelector`.
    """

    def __init__(
        self,
        judges: str | LLMSelector | Sequence[str | LLMSelector],
        *,
        k: int = 3,
        completion_kwargs: dict[str, Any] | None = None,
        client: LiteLLMClient | None = None,
        seed: int | None = None,
        response_format: bool | None = None,
        allow_none: bool = False,
    ) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigurationError(f"EnsembleSelector's k must be a whole number >= 1, got {k!r}")
        listed = [judges] if isinstance(judges, str | LLMSelector) else list(judges)
        if not listed:
            raise ConfigurationError("EnsembleSelector needs at least one judge (a model id)")
        # One given client: the judges made here share its limits.
        self.judges = [
            as_llm_selector(
                judge,
                owner="EnsembleSelector",
                completion_kwargs=completion_kwargs,
                client=client,
                response_format=response_format,
                allow_none=allow_none,
            )
            for judge in listed
        ]
        self.k = k
        self.seed = seed

    def bind_client(self, client: LiteLLMClient) -> None:
        """Binds every judge to `client`, unless it was given a client of its own.

        Args:
            client: the graph's client, whose limits then bound the judges' calls.
        """
        for judge in self.judges:
            judge.bind_client(client)

    @property
    def name(self) -> str:
        """`ensemble:<k>x<the judges' models>`."""
        models = ",".join(dict.fromkeys(j.model for j in self.judges))
        return f"ensemble:{self.k}x{models}"

    def orders(self, candidates: Sequence[Candidate]) -> list[list[int]]:
        """The display order of each call: rotations of one seeded shuffle.

        Args:
            candidates: the candidates to show.

        Returns:
            `k` orders of their positions, call i's the shuffle rotated by i.
        """
        base = seeded_order(candidates, self.seed)
        return [base[i % len(base) :] + base[: i % len(base)] for i in range(self.k)]

    async def select(
        self, messages: Sequence[BaseMessage], candidates: Sequence[Candidate]
    ) -> Selection:
        """Asks the `k` calls concurrently and counts their votes.

        Args:
            messages: the transcript each of the `k` calls is shown.
            candidates: shown to each call in an order of its own (`orders`).

        Returns:
            The most-voted candidate (ties: the earliest); every candidate rejected when
                rejections outnumber every candidate's votes; the majority or the first,
                with `fallback`, when no judge answered.
        """
        orders = self.orders(candidates)
        judges = [self.judges[i % len(self.judges)] for i in range(self.k)]
        asked = await gather_all(
            [
                judge.ask(messages, [candidates[p] for p in order])
                for judge, order in zip(judges, orders, strict=True)
            ]
        )
        tally: Counter[int] = Counter()
        rejections = 0
        votes: list[dict[str, Any]] = []
        for judge, order, result in zip(judges, orders, asked, strict=True):
            vote: dict[str, Any] = {
                "model": judge.model,
                "order": [candidates[p].index for p in order],
                "choice": None,
            }
            if result.value is None:
                vote["error"] = result.error
            elif result.value == NONE_ACCEPTABLE:
                vote["choice"] = "none"
                rejections += 1
            else:
                position = order[result.value]
                tally[position] += 1
                vote["choice"] = candidates[position].index
            votes.append(vote)
        usage = sum((a.usage for a in asked), Usage())
        answer = json.dumps(
            {"votes": votes, "tally": {candidates[p].index: n for p, n in sorted(tally.items())}}
        )
        common: dict[str, Any] = {
            "selector": self.name,
            "answer": answer,
            "usage": usage,
            "permutation": [candidates[p].index for p in orders[0]],
        }
        if not tally and not rejections:
            first = next(a.error for a in asked if a.error)
            return fall_back(candidates, f"no judge answered ({first})", **common)
        best = max(tally.values(), default=0)
        if rejections > best:
            return Selection(index=0, none_acceptable=True, **common)
        winner = min(p for p, n in tally.items() if n == best)  # ties: the earliest
        return Selection(index=winner, **common)
