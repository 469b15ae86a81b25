"""A Turn-BoN agent with a shell tool for LangGraph Server, configured from the environment.

`langgraph.json` at the repository root serves `make_graph` as the graph `turnbon`:

    TURNBON_MODEL=openai/gpt-4o-mini TURNBON_API_KEY=sk-... langgraph dev

Environment (read each time the server asks for the graph; one graph per environment):

- `TURNBON_MODEL` (required): the generator's LiteLLM model id.
- `TURNBON_API_BASE`: its endpoint (an OpenAI-compatible server, say).
- `TURNBON_API_KEY`: its key. It is held as a secret (`TurnConfig` wraps it), so it is in
  no state, record, trace or log line, and the shell tool's commands never see it.
- `TURNBON_N`: candidates per turn (default 4).
- `TURNBON_SELECTOR`: `human` (a person picks: the run pauses with an interrupt, resume
  it with `Command(resume=i)`), `first`, `majority`, `random`, or a LiteLLM model id
  (an `LLMSelector` on the same endpoint); unset, an `LLMSelector` on the generator's
  model.

The shell tool runs commands on the machine that serves the graph, as the server's
user, in its working directory: there is no sandbox. Serve it only where that is safe.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
from typing import Any

from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from turnbon_graph._secrets import redact, secret_values
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.graph import create_turnbon_agent
from turnbon_graph.selectors import (
    FirstSelector,
    HumanSelector,
    MajorityVoteSelector,
    RandomSelector,
)
from turnbon_graph.selectors.base import Selector

__all__ = ["SHELL_TIMEOUT_S", "make_graph", "shell"]

SHELL_TIMEOUT_S = 30.0
"""Seconds a shell command may run before it is killed."""

_MAX_OUTPUT = 8_000
"""Characters of a command's output kept (the tail: errors come last)."""

_SELECTORS: dict[str, type[Selector]] = {
    "human": HumanSelector,
    "first": FirstSelector,
    "majority": MajorityVoteSelector,
    "random": RandomSelector,
}


@tool
def shell(command: str) -> str:
    """Run a shell command on the machine serving this agent (its working directory, no
    sandbox) and return the exit code and the combined output. Commands are killed after
    30 seconds; the environment's keys and tokens are not passed to them."""
    secrets = secret_values({"api_key": os.environ.get("TURNBON_API_KEY")})
    env = {name: value for name, value in os.environ.items() if value not in secrets}
    with subprocess.Popen(
        command,
        shell=True,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,  # its own process group: a timeout kills all it started
    ) as process:
        try:
            stdout, _ = process.communicate(timeout=SHELL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return f"timed out after {SHELL_TIMEOUT_S:g} s (killed): {command}"
    output = redact(stdout, secrets)[-_MAX_OUTPUT:]
    return f"exit code {process.returncode}\n{output}"


_SETTINGS = (
    "TURNBON_MODEL",
    "TURNBON_API_BASE",
    "TURNBON_API_KEY",
    "TURNBON_N",
    "TURNBON_SELECTOR",
)


def make_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent the `TURNBON_*` environment describes (see the module docstring).

    The server calls this for every run; one graph is built per environment, so that all
    runs share its engine, and with it `max_concurrency` and `rate_limit`."""
    return _agent(tuple(os.environ.get(name, "") for name in _SETTINGS))


@functools.lru_cache(maxsize=4)
def _agent(settings: tuple[str, ...]) -> CompiledStateGraph[Any, Any, Any, Any]:
    environment = dict(zip(_SETTINGS, settings, strict=True))
    model = environment["TURNBON_MODEL"].strip()
    if not model:
        raise ConfigurationError(
            "TURNBON_MODEL is not set: give the generator's LiteLLM model id, e.g. "
            "TURNBON_MODEL=openai/gpt-4o-mini"
        )
    endpoint: dict[str, Any] = {}
    if base := environment["TURNBON_API_BASE"]:
        endpoint["api_base"] = base
    if key := environment["TURNBON_API_KEY"]:
        endpoint["api_key"] = key
    options: dict[str, Any] = {"n": _count("TURNBON_N", environment["TURNBON_N"], default=4)}
    if endpoint:
        options["completion_kwargs"] = endpoint
    chosen = environment["TURNBON_SELECTOR"].strip()
    if chosen.lower() in _SELECTORS:
        options["selector"] = _SELECTORS[chosen.lower()]()
    elif chosen:
        options["selector"] = chosen
        if endpoint:
            options["selector_kwargs"] = endpoint
    return create_turnbon_agent(model, [shell], name="turnbon", **options).compile()


def _count(variable: str, value: str, *, default: int) -> int:
    value = value.strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"{variable} must be a whole number, got {value!r}") from None
