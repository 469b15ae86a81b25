"""`turnbon serve`'s response store (`ServeConfig.response_store`, `response_store_bytes`,
`response_store_ttl_s`) from its settings (their flags are in `options`), and the note a
`--workers` server without a shared store prints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["store_config", "warn_unshared_store"]


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
