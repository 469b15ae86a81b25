"""The selectors of the bon strategies of a comparison that are not plain bon: `fusion`
and `refine` (`registry.StrategyKind.selector`) run Turn-BoN with a `FusionSelector` or a
`RefineSelector` in place of the run's selector, so `turnbon bench --strategy bon fusion
refine` compares the three ways of turning N candidates into one action on the same
tasks, each a setting of its own.

The model that writes or revises the action is the run's selector model when it has one
(`--selector MODEL`, or the default LLM selector on the generator's model), else the
generator's model; refine revises the pick of the run's own selector. Their calls go
through the engine's client, so the run's limits bound them as they bound the others.
"""

from __future__ import annotations

from turnbon_graph.config import CONNECTION_KEYS
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.base import Selector
from turnbon_graph.selectors.fusion import FusionSelector
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.selectors.refine import RefineSelector
from turnbon_graph.turn.engine import TurnEngine
from turnbon_graph.turn.generator import CandidateGenerator

SELECTORS = ("fusion", "refine")
"""The selectors a bon strategy can name."""


def with_selector(engine: TurnEngine, name: str) -> TurnEngine:
    """`engine` (its generator, client, options and trace) with the selector `name`.

    Raises:
        ConfigurationError: `name` is none of `SELECTORS`.
    """
    generator = engine.generator
    assert isinstance(generator, CandidateGenerator)  # what TurnEngine.from_options builds
    base = engine.selector
    if isinstance(base, LLMSelector):
        model, kwargs = base.model, dict(base.completion_kwargs)
    else:  # a selector that calls no model: the generator's writes, on its endpoint
        endpoint = {**generator.completion_kwargs, **generator.specs[0].completion_kwargs}
        model = generator.models[0]
        kwargs = {k: v for k, v in endpoint.items() if k in CONNECTION_KEYS}
    seed = engine.config.seed
    selector: Selector
    if name == "fusion":
        selector = FusionSelector(
            model, completion_kwargs=kwargs, client=generator.client, seed=seed
        )
    elif name == "refine":
        selector = RefineSelector(
            model, base, completion_kwargs=kwargs, client=generator.client, seed=seed
        )
    else:
        raise ConfigurationError(f"no bon selector {name!r}: one of {', '.join(SELECTORS)}")
    return TurnEngine(
        generator=generator, selector=selector, config=engine.config, trace=engine.trace
    )
