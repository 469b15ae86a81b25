"""The environments installed packages register, found by name through entry points.

Light on purpose (no pydantic, no LangChain at import): `turnbon --help` names the group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from turnbon_graph.bench.environment import Environment

ENVIRONMENTS_GROUP = "turnbon.environments"
"""Entry-point group of environment factories, `(spec: str | None, **options) ->
Environment`; the options are the commands' environment flags (`--sandbox`), passed
only when given, so a factory that takes none still works without them."""


def environment_entry_points() -> list[EntryPoint]:
    """The installed packages' environment factories."""
    from importlib.metadata import entry_points

    return list(entry_points(group=ENVIRONMENTS_GROUP))


def load_environment(
    name: str,
    spec: str | None,
    available: Iterable[EntryPoint] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
) -> Environment:
    """The environment an installed package registers as `name`, built from `spec` (and
    `options`, keyword arguments of its factory: `{"sandbox": "container"}`)."""
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
    given = dict(options or {})
    try:
        environment = factory(spec, **given)
    except TypeError as exc:
        if not given or "unexpected keyword argument" not in str(exc):
            raise
        flags = ", ".join(f"--{key.replace('_', '-')}" for key in given)
        raise ConfigurationError(
            f"environment {name!r} ({entry.value}) takes no {flags}: leave it out"
        ) from None
    if not isinstance(environment, Environment):
        raise ConfigurationError(
            f"environment {name!r} ({entry.value}) returned {type(environment).__name__}, "
            "which lacks name, tasks() or start(); its factory must return an Environment"
        )
    return environment
