"""Which value function scores an episode's partial trajectories.

From the spec's `value`:

    None or MODEL    the LLM rubric (`value.ValueModel`) on the generator's model or on
                     MODEL, by the spec's `rubric`
    prm:MODEL        a process reward model served at MODEL (`prm`)
    oracle           the task's own tests, an upper bound that leaks the verifier (`oracle`)
    NAME[:ARGUMENT]  a value function registered as NAME (`registry.register_value`)

Every one calls through the episode's metered client (`ValueSetup.client`): its calls
count as value calls, are clamped to what the budget has left, and are bounded by the
run's limits as the generator's are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from turnbon_graph._litellm.client import CompletionClient
from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.bench.metering.budget import Ledger
from turnbon_graph.bench.metering.metered import MeteredClient
from turnbon_graph.bench.strategies.registry import value_factory, value_scheme
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.values.value import ValueFunction, ValueModel
from turnbon_graph.config import CONNECTION_KEYS
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.turn.engine import TurnEngine
from turnbon_graph.turn.generator import CandidateGenerator


@dataclass(frozen=True)
class ValueSetup:
    """What building a value function for one episode may use (`ValueFactory`)."""

    argument: str | None
    """What follows `NAME:` in the spec's value (`prm:MODEL`: MODEL); None without it."""
    spec: StrategySpec
    """The setting's strategy and its parameters (`rubric` among them)."""
    task: TaskSpec
    """The episode's task."""
    model: str
    """The generator's model id: a value function that calls a model may default to it."""
    endpoint: dict[str, Any]
    """The generator's connection (api_base, api_key, ...): what calls to `model` use."""
    completion_kwargs: dict[str, Any]
    """The value function's own connection (`BenchConfig.value_kwargs`, `turnbon bench
    --value-api-base`); empty when none was given (LiteLLM's own for the model)."""
    client: CompletionClient
    """The client its calls go through: metered as value calls on the episode's ledger."""
    ledger: Ledger
    """The episode's spend (a value function that forks counts its forks here)."""


ValueFactory = Callable[[ValueSetup], ValueFunction]
"""Builds a value function for one episode: what `register_value` takes."""


def value_model_id(spec: StrategySpec, generator_model: str) -> str | None:
    """The model a setting's value calls go to (for prices): the LLM rubric's, or a
    process reward model's; None for a value function that names no model."""
    scheme = value_scheme(spec.value)
    if scheme is None:
        return spec.value or generator_model
    return scheme[1] if scheme[0] == "prm" else None


def make_value(
    engine: TurnEngine,
    spec: StrategySpec,
    task: TaskSpec,
    kwargs: dict[str, Any] | None,
    ledger: Ledger,
) -> ValueFunction:
    """The value function of `spec` for one episode, calling through the engine's client
    (metered on `ledger`); `kwargs`: its connection (None: the generator's endpoint for
    the generator's model, else LiteLLM's own)."""
    generator = engine.generator
    assert isinstance(generator, CandidateGenerator)  # what TurnEngine.from_options builds
    client = MeteredClient(generator.client, ledger, "value")
    scheme = value_scheme(spec.value)
    given = {**generator.completion_kwargs, **generator.specs[0].completion_kwargs}
    endpoint = {k: v for k, v in given.items() if k in CONNECTION_KEYS}
    if scheme is None:
        model = spec.value or generator.models[0]
        if kwargs is None and spec.value is None:
            kwargs = endpoint
        return ValueModel(model, completion_kwargs=kwargs, client=client, rubric=spec.rubric)
    name, argument = scheme
    setup = ValueSetup(
        argument, spec, task, generator.models[0], endpoint, dict(kwargs or {}), client, ledger
    )
    made = value_factory(name)(setup)
    if not isinstance(made, ValueFunction):
        raise ConfigurationError(
            f"the value function {name!r} built {type(made).__name__}, which lacks name, "
            "score() or request_size(): its factory must return a ValueFunction"
        )
    return made
