"""How to install an optional extra: the one wording every message and docstring uses.

turnbon-graph is installed from a clone (`pip install -e '.[all]'`) or from a wheel built
from one (`python -m build`, then
`pip install 'dist/turnbon_graph-0.1.0-py3-none-any.whl[all]'`). No package index has it,
so no message says `pip install 'turnbon-graph[...]'`. The extras are declared in
pyproject.toml: serve, ray, local, plots, notebooks, terminal, bfcl, harbor, inspect, and
`all` of those (`test` and `docs` are the project's own).
"""

from __future__ import annotations

from turnbon_graph import __version__

UNKNOWN_VERSION = "0+unknown"
"""`turnbon_graph.__version__` in a source tree that was never installed."""


def wheel_name(version: str = __version__) -> str:
    """The file name of turnbon-graph's wheel at `version`, as `python -m build` writes
    it into dist/ (`<version>` when the version is unknown)."""
    shown = "<version>" if version == UNKNOWN_VERSION else version
    return f"turnbon_graph-{shown}-py3-none-any.whl"


def install_hint(*extras: str, then: str | None = None, markdown: bool = False) -> str:
    """The commands that add `extras` to turnbon-graph, from a clone and from a wheel, as
    one line for a message.

    For example `install_hint("serve")` is::

        pip install -e '.[serve]' in a clone of turnbon-graph, or
        pip install 'turnbon_graph-0.1.0-py3-none-any.whl[serve]' in the folder of its wheel

    Args:
        *extras: the extras' names.
        then: a command to run after either (a package that must come with --no-deps).
        markdown: each command in backticks.

    Returns:
        The line.

    Raises:
        ValueError: no extra is given.
    """
    if not extras:
        raise ValueError("install_hint needs at least one extra")
    names = ",".join(extras)
    tick = "`" if markdown else ""
    hint = (
        f"{tick}pip install -e '.[{names}]'{tick} in a clone of turnbon-graph, or "
        f"{tick}pip install '{wheel_name()}[{names}]'{tick} in the folder of its wheel"
    )
    return f"{hint}; then {tick}{then}{tick}" if then else hint
