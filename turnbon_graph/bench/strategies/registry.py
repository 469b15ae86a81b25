"""The strategies and value functions a run can name: `--strategy NAME` and a setting's
`StrategySpec.name`, and `StrategySpec.value` when it names a value function rather than
a model (`prm:MODEL`, `oracle`). In the standard library only: the command line lists
them without loading them (`turnbon --help` answers at once), and a run loads only the
ones it uses.

A new strategy is one class: a subclass of `search.Strategy` whose `kind` (a
`StrategyKind`) names it and says which parameters it takes, added with
`register_strategy`. A new value function is a factory, `(ValueSetup) -> ValueFunction`
(`valuing.ValueSetup`), added with `register_value`. docs/strategies.md has a worked
example of both.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from turnbon_graph.bench.strategies.names import DEFAULT_AGREE, DEFAULT_HORIZON
from turnbon_graph.errors import ConfigurationError

T = TypeVar("T")
NAME = re.compile(r"[a-z][a-z0-9_-]*")
"""What a strategy's or a value function's name may be: it goes into labels and flags."""
MODULE = "turnbon_graph.bench.strategies"


@dataclass(frozen=True)
class StrategyKind:
    """What a run knows of a strategy before loading it: its name, the parameters it
    takes (each with its default) and how its settings run."""

    name: str
    """How runs name it (`--strategy NAME`, `StrategySpec.name`, the setting's label):
    lower-case letters, digits, `-` and `_`."""
    summary: str = ""
    """What a turn does, in one line (`turnbon bench --help`)."""
    width: int | None = None
    """Its default width (trajectories or particles kept); None: it takes no width."""
    value: bool = False
    """A value function guides it: it takes `--value` (and `--value-rubric`)."""
    horizon: int | None = None
    """Its default rollout horizon; None: it takes none (lookahead's)."""
    agree: float | None = None
    """Its default agreement threshold; None: it takes none (escalate's)."""
    n: int | None = None
    """The one N it runs at, whatever `-n` says (particle filtering: 1); None: any N."""
    resamples: bool = False
    """It resamples by value at `--value-temperature` (particle filtering), so each
    temperature is a setting of its own."""
    graph: bool = False
    """Without a token budget its episodes are plain Turn-BoN episodes of the agent
    graph (bon, fusion, refine); under one, and for every other strategy, they run
    through the search loop."""
    selector: str | None = None
    """It is bon with this selector in place of the run's: `fusion` or `refine`
    (`bon_selectors`)."""
    target: str | None = None
    """Where a built-in strategy's class is, `module:Class`, imported on first use."""


BUILT_IN = (
    StrategyKind(
        "bon",
        "N candidates a turn, the selector picks one",
        graph=True,
        target=f"{MODULE}.bon:BestOfN",
    ),
    StrategyKind(
        "beam",
        "--width trajectories, each proposing N candidates a turn, each run in a fork of "
        "its environment, the best by --value kept",
        width=2,
        value=True,
        target=f"{MODULE}.beam:Beam",
    ),
    StrategyKind(
        "particle",
        "--width particles of one candidate a turn, resampled by value",
        width=3,
        value=True,
        n=1,
        resamples=True,
        target=f"{MODULE}.particle:Particles",
    ),
    StrategyKind(
        "lookahead",
        "N candidates, each run in a fork and rolled out --horizon turns; the one whose "
        "rollout --value scores best is taken",
        value=True,
        horizon=DEFAULT_HORIZON,
        target=f"{MODULE}.lookahead:Lookahead",
    ),
    StrategyKind(
        "escalate",
        "N candidates; below --agree agreement, N more with more effort",
        agree=DEFAULT_AGREE,
        target=f"{MODULE}.escalate:Escalate",
    ),
    StrategyKind(
        "fusion",
        "bon whose selector writes the action to run from the N candidates",
        graph=True,
        selector="fusion",
        target=f"{MODULE}.bon:Fused",
    ),
    StrategyKind(
        "refine",
        "bon whose selector's pick is critiqued and revised once",
        graph=True,
        selector="refine",
        target=f"{MODULE}.bon:Refined",
    ),
)
"""The strategies that ship, in the order the help lists them."""

BUILT_IN_VALUES = {
    "prm": "turnbon_graph.bench.values.prm:process_reward_model",
    "oracle": "turnbon_graph.bench.values.oracle:tests_oracle",
}
"""The value functions that ship besides the LLM rubric (a model id): a process reward
model (`prm:MODEL`) and the task's own tests (`oracle`)."""

_kinds: dict[str, StrategyKind] = {kind.name: kind for kind in BUILT_IN}
_classes: dict[str, type] = {}
_values: dict[str, str | Callable[[Any], Any]] = dict(BUILT_IN_VALUES)


def built_in(name: str) -> StrategyKind:
    """The kind of the built-in strategy `name` (its class's `kind`)."""
    return next(kind for kind in BUILT_IN if kind.name == name)


def strategy_names() -> list[str]:
    """Every strategy a run can name: the built-in ones, then those registered."""
    return list(_kinds)


def strategy_kinds() -> list[StrategyKind]:
    """Every strategy's kind, in the order of `strategy_names`."""
    return list(_kinds.values())


def known_kind(name: str) -> StrategyKind | None:
    """The kind of the strategy `name`, or None when this process does not know it (a
    run folder of a strategy registered elsewhere, read back)."""
    return _kinds.get(name)


def strategy_kind(name: str) -> StrategyKind:
    """The kind of the strategy `name`; a clear error naming the known ones if none."""
    kind = _kinds.get(name)
    if kind is None:
        raise ConfigurationError(
            f"unknown strategy {name!r} (known: {', '.join(_kinds)}); a strategy of your "
            "own is registered with register_strategy before the run starts"
        )
    return kind


def register_strategy(cls: type[T]) -> type[T]:
    """Adds the strategy class `cls` under the name its `kind` gives (usable as a class
    decorator); registering a class of the same module and name again replaces it.

    Args:
        cls: a subclass of `search.Strategy` with a `kind` of its own.

    Returns:
        `cls` itself.

    Raises:
        ConfigurationError: `cls.kind` is no `StrategyKind`, its name is not lower-case
            letters, digits, `-` and `_`, or another strategy has that name.
    """
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, StrategyKind) or kind.target is not None:
        raise ConfigurationError(
            f"{cls.__name__} needs a `kind = StrategyKind(name=...)` of its own to be "
            "registered (its name and the parameters it takes)"
        )
    check_name(kind.name, "strategy")
    if kind.name in _kinds and not _same_class(_classes.get(kind.name), cls):
        raise ConfigurationError(
            f"a strategy named {kind.name!r} exists already: give {cls.__name__}'s kind "
            "another name"
        )
    _kinds[kind.name] = kind
    _classes[kind.name] = cls
    return cls


def strategy_class(name: str) -> type:
    """The class of the strategy `name`, its module imported on first use."""
    kind = strategy_kind(name)
    if name not in _classes:
        assert kind.target is not None  # a registered class is in _classes
        _classes[name] = load(kind.target)
    return _classes[name]


def register_value(name: str, factory: Callable[[Any], Any]) -> None:
    """Adds the value function `factory` builds under `name`: a spec's `value` of
    `name` or `name:ARGUMENT` then uses it. `factory` is a `valuing.ValueFactory`: it
    takes a `valuing.ValueSetup` (its `argument` holds ARGUMENT) and returns a
    `value.ValueFunction`. Registering a name again replaces its factory, the built-in
    ones' excepted.

    Args:
        name: how a spec's `value` names it.
        factory: builds the value function of one episode from its `ValueSetup`.

    Raises:
        ConfigurationError: `name` is not lower-case letters, digits, `-` and `_`, or
            names a built-in value function.
    """
    check_name(name, "value function")
    if name in BUILT_IN_VALUES:
        raise ConfigurationError(f"{name!r} is a built-in value function: choose another name")
    _values[name] = factory


def value_scheme(value: str | None) -> tuple[str, str | None] | None:
    """(value function, argument) when `value` names a registered value function
    (`oracle`, `prm:openai/my-prm`); None when it is a model id for the LLM rubric, or
    None (the generator's model)."""
    if value is None:
        return None
    name, colon, argument = value.partition(":")
    if name in _values:
        return name, (argument if colon else None)
    return None


def value_factory(name: str) -> Callable[[Any], Any]:
    """The factory of the value function `name`, its module imported on first use."""
    found = _values[name]
    if isinstance(found, str):
        found = load(found)
        _values[name] = found
    return found


def check_name(name: str, what: str) -> None:
    """Refuses a name that would not read well in a label or on the command line."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigurationError(
            f"{what} name {name!r}: use lower-case letters, digits, '-' and '_', starting "
            "with a letter"
        )


def load(target: str) -> Any:
    """The object `module:name` names."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _same_class(registered: type | None, cls: type) -> bool:
    """Whether `cls` is `registered` again (its module run a second time)."""
    if registered is None:
        return False
    return (registered.__module__, registered.__qualname__) == (cls.__module__, cls.__qualname__)
