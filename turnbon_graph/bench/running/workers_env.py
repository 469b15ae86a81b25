"""How an environment goes to Ray workers: as an installed environment's name and
arguments (`RegisteredEnvironment`, loaded on each worker), or pickled, or refused before
Ray starts when it cannot be."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnbon_graph.bench.environment import Environment, Episode, TaskSpec
from turnbon_graph.errors import ConfigurationError


class RegisteredEnvironment:
    """An installed environment (`turnbon.environments` entry point `name`, built from
    `spec` and the environment flags `options`) that pickles as just those: each Ray
    worker loads it from the package installed on its own machine (the terminal
    environment's tasks and sandbox are that machine's).

    Args:
        name: the entry point's name (`--env`).
        spec: what its factory builds it from (a tasks folder, say), if anything.
        loaded: the instance this process already has, if any.
        options: keyword arguments of its factory (the environment flags).
    """

    def __init__(
        self,
        name: str,
        spec: str | None,
        loaded: Environment | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self._recipe = (name, spec, None, dict(options or {}))
        self._loaded = loaded

    @property
    def loaded(self) -> Environment:
        """The environment, loaded on first use in this process."""
        if self._loaded is None:
            from turnbon_graph.bench.registry import load_environment

            name, spec, _, options = self._recipe
            self._loaded = load_environment(name, spec, options=options)
        return self._loaded

    @property
    def name(self) -> str:
        """The loaded environment's name."""
        return self.loaded.name

    def tasks(self) -> Sequence[TaskSpec]:
        """The loaded environment's tasks.

        Returns:
            Every task.
        """
        return self.loaded.tasks()

    async def start(self, task: TaskSpec, trial: int) -> Episode:
        """An episode of the loaded environment.

        Args:
            task: one of `tasks()`.
            trial: which attempt at the task this is.

        Returns:
            The episode.
        """
        return await self.loaded.start(task, trial)

    def __getattr__(self, attribute: str) -> Any:
        """The environment's other attributes (its `stub_policy`, ...)."""
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self.loaded, attribute)

    def __reduce__(self) -> tuple[Any, tuple[str, str | None, None, dict[str, Any]]]:
        return (RegisteredEnvironment, self._recipe)


def refuse_unpicklable(ray_module: Any, environment: Environment) -> None:
    """Refuses, before Ray starts, an environment that cannot go to the workers (one
    holding a lock, a process, an open file) with what to pass instead (blocking: it
    pickles the environment).

    Raises:
        ConfigurationError: it does not pickle.
    """
    try:
        ray_module.cloudpickle.dumps(environment)
    except Exception as exc:
        name = type(environment).__name__
        raise ConfigurationError(
            f"the {name} cannot go to Ray workers ({type(exc).__name__}: {exc}); pass "
            "RegisteredEnvironment(NAME, SPEC, options=...) (an installed environment, "
            "loaded on each worker), or give the environment a __reduce__ that rebuilds it"
        ) from None
