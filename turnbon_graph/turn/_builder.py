"""Building a turn's parts from a `TurnConfig`: the one call client and the selector.

`TurnConfig` only declares options; what they make is made here, so that the options
module imports no client and no selector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph._secrets import reveal_secrets
from turnbon_graph.config import CONNECTION_KEYS, TurnConfig
from turnbon_graph.selectors.base import Selector
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.selectors.prompting import bind_selector


def call_client(config: TurnConfig) -> LiteLLMClient:
    """The one client of a turn's calls (generator and selector): its limits bound them
    all, and its `router` routes those that name a model group."""
    return LiteLLMClient(
        max_concurrency=config.max_concurrency,
        rate_limit=config.rate_limit,
        timeout=config.timeout,
        max_retries=config.max_retries,
        seed=config.seed,
        router=config.router,
    )


def resolve_selector(
    config: TurnConfig,
    generator_model: str,
    generator_kwargs: Mapping[str, Any],
    client: LiteLLMClient,
) -> Selector:
    """The selector a turn runs. A model id becomes an `LLMSelector` on it; `None` an
    `LLMSelector` on the generator's model that shares its endpoint (`CONNECTION_KEYS`
    of `generator_kwargs`). A `Selector` instance that calls models is bound to
    `client`, so the turn's limits bound it too, unless it was given a client of its own."""
    selector = config.selector
    if isinstance(selector, Selector):
        bind_selector(selector, client)
        return selector
    if isinstance(selector, BaseChatModel):
        return LLMSelector(selector, seed=config.seed)
    if config.selector_kwargs is not None:
        kwargs: dict[str, Any] | None = reveal_secrets(config.selector_kwargs)
    elif selector is None:
        kwargs = {k: v for k, v in generator_kwargs.items() if k in CONNECTION_KEYS}
    else:
        kwargs = None
    return LLMSelector(
        selector or generator_model, completion_kwargs=kwargs, client=client, seed=config.seed
    )
