"""`turnbon serve`'s own flags, declared once: each is a `Flag` by its setting's name,
whose default is the setting's default. The parser adds them in this order, `SETTINGS`
(what a `--config` file may set) is read from them, and the docs' list of flags is held to
them by a test."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from turnbon_graph.cli.flags.shared import Flag
from turnbon_graph.cli.flags.values import finite_positive, megabytes, positive_int

__all__ = ["LOG_LEVELS", "SERVER_FLAGS", "SETTINGS", "SHARED_SETTINGS", "STORE_SETTINGS"]

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
"""uvicorn's log levels (`uvicorn.config.LOG_LEVELS`, not imported: --help stays quick)."""

SERVER_FLAGS: dict[str, Flag] = {
    "api_key_env": Flag(
        ("--api-key-env",),
        {
            "metavar": "NAME",
            "help": "the environment variable holding the upstream api_key (default: LiteLLM "
            "reads the provider's own, e.g. OPENAI_API_KEY)",
        },
    ),
    "host": Flag(("--host",), {"default": "127.0.0.1", "help": "the address to listen on"}),
    "port": Flag(
        ("--port",), {"type": int, "default": 8000, "help": "the port to listen on (0: any free)"}
    ),
    "name": Flag(("--name",), {"default": "turnbon", "help": "the model id GET /v1/models lists"}),
    "require_key_env": Flag(
        ("--require-key-env",),
        {
            "metavar": "NAME",
            "help": "clients must send this environment variable's value as their bearer key",
        },
    ),
    "shutdown_timeout": Flag(
        ("--shutdown-timeout",),
        {
            "type": float,
            "default": 30.0,
            "metavar": "S",
            "help": "on SIGTERM/SIGINT, seconds in-flight requests get before they are cancelled",
        },
    ),
    "workers": Flag(
        ("--workers",),
        {
            "type": positive_int,
            "default": 1,
            "metavar": "K",
            "help": "server processes on the one port (uvicorn's workers), each with an engine "
            "of its own: max_concurrency and rate_limit then hold per worker",
        },
    ),
    "keepalive_s": Flag(
        ("--keepalive",),
        {
            "type": float,
            "default": 15.0,
            "metavar": "S",
            "help": "a streamed turn running longer starts its stream and sends an SSE comment "
            "every S seconds, so read timeouts do not end it (0: never)",
        },
    ),
    "max_body_mb": Flag(
        ("--max-body-mb",),
        {
            "type": megabytes,
            "default": 10.0,
            "metavar": "MB",
            "help": "a larger request body (in MiB, at most 1 TiB), or a request continuing a "
            "larger stored conversation, gets a 413 before the rest of it is read",
        },
    ),
    "header_timeout_s": Flag(
        ("--header-timeout",),
        {
            "type": finite_positive,
            "default": 10.0,
            "metavar": "S",
            "help": "a connection that has not sent a request's line and headers within S "
            "seconds is closed",
        },
    ),
    "body_timeout_s": Flag(
        ("--body-timeout",),
        {
            "type": finite_positive,
            "default": 60.0,
            "metavar": "S",
            "help": "a request body that has not arrived within S seconds of its headers gets "
            "a 408 and the connection is closed",
        },
    ),
    "idle_timeout_s": Flag(
        ("--idle-timeout",),
        {
            "type": positive_int,
            "default": 5,
            "metavar": "S",
            "help": "an idle kept-alive connection is closed after S seconds (uvicorn's "
            "timeout_keep_alive)",
        },
    ),
    "response_store": Flag(
        ("--response-store",),
        {
            "type": Path,
            "metavar": "PATH",
            "help": "keep the stored Responses API responses (previous_response_id, "
            "item_reference, GET /v1/responses/ID) in this SQLite file, which every worker "
            "process shares (default: in each process's memory)",
        },
    ),
    "response_store_mb": Flag(
        ("--response-store-mb",),
        {
            "type": megabytes,
            "default": 64.0,
            "metavar": "MB",
            "help": "the stored responses' size (MiB of JSON, at most 1 TiB) past which the "
            "oldest are dropped",
        },
    ),
    "response_store_ttl_s": Flag(
        ("--response-store-ttl",),
        {
            "type": finite_positive,
            "default": 24 * 3600.0,
            "metavar": "S",
            "help": "seconds a stored response is kept",
        },
    ),
    "log_level": Flag(
        ("--log-level",),
        {
            "choices": LOG_LEVELS,
            "default": "info",
            "help": "the server's and uvicorn's log level (info: a line per turn)",
        },
    ),
    "access_log": Flag(
        ("--access-log",),
        {
            "action": argparse.BooleanOptionalAction,
            "default": False,
            "help": "also a line per request (uvicorn's access log, at info)",
        },
    ),
}
"""The server's own flags, by their setting's name (each flag's `dest`)."""

SHARED_SETTINGS = ("model", "api_base", "selector", "selector_api_base", "temperature")
"""Settings that are shared flags of the other commands too (`flags.shared.SHARED`)."""

SETTINGS: dict[str, Any] = {
    **dict.fromkeys(SHARED_SETTINGS),
    **{name: flag.options.get("default") for name, flag in SERVER_FLAGS.items()},
}
"""The server's own settings and their defaults (a --config file may set them too)."""

STORE_SETTINGS = tuple(name for name in SETTINGS if name.startswith("response_store"))
"""The response store's settings (`store.store_config`)."""


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """The server's own flags, each with its setting's name as its `dest`."""
    for name, flag in SERVER_FLAGS.items():
        flag.add(parser, dest=name)


def flags_table() -> str:
    """The server's own flags as the Markdown table docs/serve.md shows (a test holds the
    page to it): each flag, its `--config` file key, its default and its help."""
    rows = ["| flag | `--config` key | default | what it does |", "| --- | --- | --- | --- |"]
    for key, flag in SERVER_FLAGS.items():
        names = ", ".join(f"`{n}`" for n in flag.names)
        if flag.options.get("action") is argparse.BooleanOptionalAction:
            names = f"`{flag.names[0]}`, `--no-{flag.names[0][2:]}`"
        default = flag.options.get("default")
        shown = (
            ""
            if default is None
            else f"`{default:g}`"
            if isinstance(default, float)
            else f"`{default}`"
        )
        rows.append(f"| {names} | `{key}` | {shown} | {flag.options['help']} |")
    return "\n".join(rows)
