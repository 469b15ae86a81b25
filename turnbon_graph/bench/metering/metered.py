"""Every model call of a search goes through a `MeteredClient`: it counts the call on the
episode's ledger by kind (generator, selector, value, rollout), teaches the run's
estimates what it cost, and under a budget clamps its `max_tokens` to what its share of
what is left affords (`budget.Ledger.allowance`), or refuses it when not even its prompt
fits. A call whose every answer the clamp cut off is spent and counted, then ends as
refused too: what the budget left could not buy an answer. `metered_engine` and
`metered_selector` put one under a search's generator and selector; the value model is
given one (`search_episode.value_model`)."""

from __future__ import annotations

import copy
from typing import Any

from turnbon_graph._litellm.client import CallResult, CompletionClient
from turnbon_graph.bench.draws import with_generator_client
from turnbon_graph.bench.metering.budget import (
    REFUSED,
    BudgetRefused,
    Kind,
    Ledger,
    request_chars,
)
from turnbon_graph.turn.engine import TurnEngine

MAX_TOKEN_KEYS = ("max_tokens", "max_completion_tokens")
"""The settings that cap an answer's tokens; a clamp lowers whichever the call has."""


class MeteredClient:
    """A `CompletionClient` that keeps one kind of an episode's calls on its ledger."""

    def __init__(self, inner: CompletionClient, ledger: Ledger, kind: Kind) -> None:
        self.inner = inner
        self.ledger = ledger
        self.kind = kind

    async def complete(self, **kwargs: Any) -> CallResult:
        ledger, kind = self.ledger, self.kind
        size = request_chars(kwargs.get("messages") or [], kwargs.get("tools"))
        answers = int(kwargs.get("n") or 1)
        if ledger.budget is None:
            result = await self.inner.complete(**kwargs)
        else:
            prompt = ledger.estimate(kind, size, 0)
            allowance = ledger.allowance(ledger.estimate(kind, size, answers))
            try:
                cap = ledger.max_tokens(kind, allowance - prompt, answers)
                if cap < 1:
                    ledger.refused += 1
                    raise BudgetRefused(
                        f"{REFUSED}: its prompt alone is estimated at {prompt:.6g} of the "
                        f"{allowance:.6g} it may spend ({ledger.meter.unit})"
                    )
                clamped = clamp(kwargs, cap)
                result = await self.inner.complete(**kwargs)
            finally:
                ledger.release(allowance)
            if clamped and cut_off(result):  # the budget's doing, not the model's
                ledger.add(kind, result.usage, size, answers)
                ledger.refused += 1
                raise BudgetRefused(
                    f"{REFUSED}: every answer was cut off at the {cap} tokens it had left"
                )
        ledger.add(kind, result.usage, size, answers)
        return result


def clamp(kwargs: dict[str, Any], cap: int) -> bool:
    """Lowers the call's own answer cap to `cap`, or sets `max_tokens` when it has none;
    whether `cap` is now what bounds the answers (the call's own cap was not lower)."""
    given = [key for key in MAX_TOKEN_KEYS if kwargs.get(key)]
    lowered = not given or any(int(kwargs[key]) > cap for key in given)
    for key in given:
        kwargs[key] = min(int(kwargs[key]), cap)
    if not given:
        kwargs["max_tokens"] = cap
    return lowered


def cut_off(result: CallResult) -> bool:
    """Whether every answer of the call stopped at its token cap (finish reason
    `length`)."""
    choices = getattr(result.response, "choices", None) or []
    return bool(choices) and all(getattr(c, "finish_reason", None) == "length" for c in choices)


def metered_selector(selector: Any, ledger: Ledger) -> tuple[Any, bool]:
    """A copy of `selector` calling through a metered client, and True; the selector
    itself and False when it has no client of its own (it calls no model, or calls one
    some other way: its spend is then read from the turn records). A selector around
    an `inner` one (refine) has the inner one metered too, or is left as it is."""
    client = getattr(selector, "client", None)
    if client is None or not callable(getattr(client, "complete", None)):
        return selector, False
    inner, metered_inner = None, True
    if getattr(selector, "inner", None) is not None:
        inner, metered_inner = metered_selector(selector.inner, ledger)
    if not metered_inner:  # half its calls out of sight: all of it read from the records
        return selector, False
    metered = copy.copy(selector)
    metered.client = MeteredClient(client, ledger, "selector")
    if inner is not None:
        metered.inner = inner
    return metered, True


def metered_engine(
    engine: TurnEngine, ledger: Ledger, kind: Kind, selector: Any | None = None
) -> TurnEngine:
    """`engine` with its generator's calls metered as `kind` (and `selector`, already
    metered, in place of its own when given)."""

    def meter(client: CompletionClient) -> CompletionClient:
        inner = client.inner if isinstance(client, MeteredClient) else client
        return MeteredClient(inner, ledger, kind)

    return with_generator_client(engine, meter, selector=selector)
