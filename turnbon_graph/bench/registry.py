"""The environments installed packages register, found by name through entry points.

Light on purpose (no pydantic, no LangChain at import): `turnbon --help` names the group.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from turnbon_graph.bench.environment import Environment

ENVIRONMENTS_GROUP = "turnbon.environments"
"""Entry-point group of environment factories, `(spec: str | None) -> Environment`."""


def environment_entry_points() -> list[EntryPoint]:
    """The installed packages' environment factories."""
    from importlib.metadata import entry_points

    return list(entry_points(group=ENVIRONMENTS_GROUP))


def load_environment(
    name: str, spec: str | None, available: Iterable[EntryPoint] | None = None
) -> Environment:
    """The environment an installed package registers as `name`, built from `spec`."""
    from turnbon_graph.bench.environment import Environment
    from turnbon_graph.errors import ConfigurationError

    found = {ep.name: ep for ep in (environment_entry_points() if available is None else available)}
    if name not in found:
        listed = ", ".join(sorted(found)) or "none installed"
        raise ConfigurationError(
            f"unknown environment {name!r} (available: {listed}); install a package that "
            f"registers it under the entry-point group '{ENVIRONMENTS_GROUP}'"
        )
    entry = found[name]
    try:
        factory = entry.load()
    except Exception as exc:
        raise ConfigurationError(
            f"environment {name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}; "
            "is the package that provides it installed completely?"
        ) from exc
    environment = factory(spec)
    if not isinstance(environment, Environment):
        raise ConfigurationError(
            f"environment {name!r} ({entry.value}) returned {type(environment).__name__}, "
            "which lacks name, tasks() or start(); its factory must return an Environment"
        )
    return environment
