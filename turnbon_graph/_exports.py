"""How the package hands out names: on first use, and at the paths they had before.

`lazy_exports` gives a package's `__init__` a PEP 562 `__getattr__` that imports a name's
module only when the name is first asked for, so `turnbon --help` and light tools do not
pay for LangGraph or LiteLLM, and a subpackage's `__init__` never imports its modules
while one of them is still being imported.

`MOVED` lists the modules that moved when the package took its present layout;
`install_moved_modules` lets `import turnbon_graph.client` and the rest keep working, for
one minor version, with a `DeprecationWarning` that names the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["MOVED", "install_moved_modules", "lazy_exports"]


def lazy_exports(
    package: str, sources: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each name of `sources` is imported from
    its module (a path relative to `package`) on first use, then kept in the package."""

    def __getattr__(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(sources)

    return __getattr__, __dir__


MOVED: Mapping[str, Sequence[str]] = {
    "turnbon_graph.bench.plan": ("turnbon_graph.bench.running.plan",),
    "turnbon_graph.bench.runner": ("turnbon_graph.bench.running.runner",),
    "turnbon_graph.bench.local_runner": ("turnbon_graph.bench.running.local_runner",),
    "turnbon_graph.bench.ray_runner": ("turnbon_graph.bench.running.ray_runner",),
    "turnbon_graph.bench.runs": ("turnbon_graph.bench.running.runs",),
    "turnbon_graph.bench.progress": ("turnbon_graph.bench.running.progress",),
    "turnbon_graph.bench.limits": ("turnbon_graph.bench.running.limits",),
    "turnbon_graph.bench.report_format": ("turnbon_graph.bench.report.format",),
    "turnbon_graph.bench.report_pairs": ("turnbon_graph.bench.report.pairs",),
    "turnbon_graph.bench.report_sections": ("turnbon_graph.bench.report.sections",),
    "turnbon_graph.bench.report_spend": ("turnbon_graph.bench.report.spend",),
    "turnbon_graph.bench.report_split": ("turnbon_graph.bench.report.split",),
    "turnbon_graph.bench.report_strategies": ("turnbon_graph.bench.report.strategies",),
    "turnbon_graph.bench.plots": ("turnbon_graph.bench.report.plots",),
    "turnbon_graph.bench.strategy_plots": ("turnbon_graph.bench.report.strategy_plots",),
    "turnbon_graph.bench.html": ("turnbon_graph.bench.report.html",),
    "turnbon_graph.bench.bootstrap": ("turnbon_graph.bench.stats.bootstrap",),
    "turnbon_graph.bench.pairs": ("turnbon_graph.bench.stats.pairs",),
    "turnbon_graph.bench.metrics": ("turnbon_graph.bench.stats.metrics",),
    "turnbon_graph.bench.harbor_jobs": ("turnbon_graph.bench.readers.harbor_jobs",),
    "turnbon_graph.bench.strategies.value": ("turnbon_graph.bench.values.value",),
    "turnbon_graph.bench.strategies.valuing": ("turnbon_graph.bench.values.valuing",),
    "turnbon_graph.bench.strategies.prm": ("turnbon_graph.bench.values.prm",),
    "turnbon_graph.bench.strategies.oracle": ("turnbon_graph.bench.values.oracle",),
    "turnbon_graph.bench.strategies.budget": ("turnbon_graph.bench.metering.budget",),
    "turnbon_graph.bench.strategies.metered": ("turnbon_graph.bench.metering.metered",),
    "turnbon_graph.candidates": ("turnbon_graph.turn.candidates",),
    "turnbon_graph.chat_client": ("turnbon_graph._litellm.chat_model",),
    "turnbon_graph.client": (
        "turnbon_graph._litellm.client",
        "turnbon_graph._litellm.loading",
        "turnbon_graph._litellm.failures",
        "turnbon_graph._secrets",
    ),
    "turnbon_graph.extras": ("turnbon_graph._extras",),
    "turnbon_graph.generate": (
        "turnbon_graph.turn.generator",
        "turnbon_graph.openai.messages",
        "turnbon_graph._secrets",
    ),
    "turnbon_graph.litellm_calls": (
        "turnbon_graph._litellm.model_map",
        "turnbon_graph._litellm.quiet",
    ),
    "turnbon_graph.openai_format": (
        "turnbon_graph.openai.chat",
        "turnbon_graph.openai.fields",
        "turnbon_graph.openai.messages",
    ),
    "turnbon_graph.openai_responses": ("turnbon_graph.openai.responses",),
    "turnbon_graph.prompted_tools": ("turnbon_graph.turn.prompted_tools",),
    "turnbon_graph.sampling": ("turnbon_graph.turn.sampling",),
    "turnbon_graph.server_graph": ("turnbon_graph.langgraph_server",),
    "turnbon_graph.strategies": ("turnbon_graph.bench.strategies",),
    "turnbon_graph.sync": ("turnbon_graph._sync",),
    "turnbon_graph.turn_state": ("turnbon_graph.turn.state",),
}
"""Each module that moved, and the modules its public names are in now (searched in
order). A submodule of a moved package moved with it (`turnbon_graph.strategies.beam`)."""


class _MovedModule(types.ModuleType):
    """A moved module's old name: each attribute is looked up in its new modules."""

    def __init__(self, name: str, homes: Sequence[str]) -> None:
        super().__init__(name, f"Moved to {', '.join(homes)}.")
        self._homes = homes

    def __getattr__(self, attribute: str) -> Any:
        for home in self._homes:
            module = importlib.import_module(home)
            if hasattr(module, attribute):
                return getattr(module, attribute)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attribute!r}")

    def __dir__(self) -> list[str]:
        names = {n for h in self._homes for n in dir(importlib.import_module(h))}
        return sorted(n for n in names if not n.startswith("_"))


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module under its old name, with a `DeprecationWarning`."""

    def __init__(self, moved: Mapping[str, Sequence[str]]) -> None:
        self.moved = moved
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(fullname, self) if self._homes(fullname) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        homes = self._homes(spec.name)
        package = spec.name.partition(".")[0]
        warnings.warn(
            f"{spec.name} has moved to {' and '.join(homes)}; import the public names from "
            f"{package} (or its documented subpackages). The old path goes in the next "
            "minor version.",
            DeprecationWarning,
            stacklevel=2,  # the import system's own frames are skipped by warn
        )
        if len(homes) == 1:  # one home: the module itself, so submodules resolve too
            module = importlib.import_module(homes[0])
            self._specs[module.__name__] = module.__spec__
            return module
        return _MovedModule(spec.name, homes)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is its new home, or looks its names up there. The
        import system gave the new home the old name's spec: its own is put back."""
        if module.__name__ in self._specs:
            module.__spec__ = self._specs[module.__name__]

    def _homes(self, fullname: str) -> Sequence[str]:
        if fullname in self.moved:
            return self.moved[fullname]
        for package, homes in self.moved.items():
            if fullname.startswith(f"{package}.") and len(homes) == 1:
                return (f"{homes[0]}{fullname[len(package) :]}",)
        return ()


def install_moved_modules(moved: Mapping[str, Sequence[str]] = MOVED) -> None:
    """Lets the old module paths of `moved` (by default the library's own `MOVED`; an
    integration passes its own table) be imported, once per process and table."""
    if not any(isinstance(f, _MovedFinder) and f.moved is moved for f in sys.meta_path):
        # First, so that a submodule of a moved package is its new module, not a second
        # copy found through the package's new __path__.
        sys.meta_path.insert(0, _MovedFinder(moved))
