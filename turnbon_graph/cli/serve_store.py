"""`turnbon serve`'s response store settings (`ServeConfig.response_store`,
`response_store_bytes`, `response_store_ttl_s`): their flags, their `--config` file keys
and the note a `--workers` server without a shared store prints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from turnbon_graph.cli.arguments import positive_float

__all__ = ["STORE_SETTINGS", "store_arguments", "store_config", "warn_unshared_store"]

STORE_SETTINGS: dict[str, Any] = {
    "response_store": None,
    "response_store_mb": 64.0,
    "response_store_ttl_s": 24 * 3600.0,
}
"""The store's settings (part of `serve.SETTINGS`), as flags and file keys name them."""


def store_arguments(parser: argparse.ArgumentParser) -> None:
    """The store's flags."""
    parser.add_argument(
        "--response-store",
        type=Path,
        default=STORE_SETTINGS["response_store"],
        metavar="PATH",
        help="keep the stored Responses API responses (previous_response_id, "
        "item_reference, GET /v1/responses/ID) in this SQLite file, which every worker "
        "process shares (default: in each process's memory)",
    )
    parser.add_argument(
        "--response-store-mb",
        type=positive_float,
        default=STORE_SETTINGS["response_store_mb"],
        metavar="MB",
        help="the stored responses' size (MiB of JSON) past which the oldest are dropped",
    )
    parser.add_argument(
        "--response-store-ttl",
        dest="response_store_ttl_s",
        type=positive_float,
        default=STORE_SETTINGS["response_store_ttl_s"],
        metavar="S",
        help="seconds a stored response is kept",
    )


def store_config(settings: dict[str, Any]) -> dict[str, Any]:
    """The `ServeConfig` fields of the settings (a --config file's path is a string)."""
    from turnbon_graph.serve.config import MB

    path = settings["response_store"]
    return {
        "response_store": None if path is None else Path(path).expanduser(),
        "response_store_bytes": int(settings["response_store_mb"] * MB),
        "response_store_ttl_s": settings["response_store_ttl_s"],
    }


def warn_unshared_store(config: Any, workers: int) -> None:
    """Several workers with stores of their own: a chain finds only the responses of the
    worker each request reaches."""
    if workers > 1 and config.response_store is None:
        print(
            f"turnbon serve: each of the {workers} workers keeps its stored responses in its "
            "own memory, so previous_response_id and item_reference find only those of the "
            "worker a request reaches; share them with --response-store PATH",
            file=sys.stderr,
        )
