"""Running the app under uvicorn: in the foreground (`turnbon serve`: uvicorn's own
SIGTERM/SIGINT handling, in-flight requests finished within the shutdown timeout, then
cancelled), or on a background thread (`BackgroundServer`: tests, benchmarks, notebooks).
Either way with the server's limits (`limits.guarded_protocol`, the idle timeout, the
header size).
"""

from __future__ import annotations

import copy
import gc
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.config import LOG_LEVELS, LOGGING_CONFIG

from turnbon_graph._litellm.loading import import_litellm
from turnbon_graph.serve.app import create_app
from turnbon_graph.serve.config import DEFAULT_HOST, ServeConfig
from turnbon_graph.serve.limits import guarded_protocol

__all__ = ["BackgroundServer", "freeze_long_lived", "run_server"]


def run_server(
    config: ServeConfig,
    *,
    log_level: str = "info",
    access_log: bool = False,
    workers: int = 1,
    factory: str | None = None,
) -> None:
    """Serves `config` until SIGTERM or SIGINT.

    Args:
        config: what to serve, where, and the server's limits.
        log_level: uvicorn's levels; it holds for uvicorn's lines and the server's own (a
            line per turn at info).
        access_log: adds uvicorn's line per request (at info).
        workers: with more than 1, that many processes on the one port (uvicorn's own
            workers), each app made by `factory`.
        factory: an import string "module:function" that builds the app afresh in each
            worker; needed with several workers.

    Raises:
        ValueError: several `workers` without a `factory`.
        ConfigurationError: the engine cannot be made from `config`.
    """
    settings = {
        **_settings(config, log_level),
        "log_config": log_config(log_level),
        "access_log": access_log,
    }
    if workers > 1:
        if factory is None:
            raise ValueError("several workers need a factory: each builds its own app")
        uvicorn.run(factory, factory=True, workers=workers, port=config.port, **settings)
        return
    app = create_app(config)
    freeze_long_lived()
    server = uvicorn.Server(uvicorn.Config(app, port=config.port, **settings))
    server.run()


def freeze_long_lived() -> None:
    """LiteLLM imported, then every object alive now (LiteLLM, the app) out of the garbage
    collector's passes. They live as long as the server, and each full collection walked
    them all, holding every request up for a quarter of a second
    (benchmarks/serve_large_body.py). Only for a process the server owns (`turnbon
    serve` and its workers): a process that embeds one keeps its own collector's rules."""
    import_litellm()
    gc.collect()
    gc.freeze()


def _settings(config: ServeConfig, log_level: str) -> dict[str, Any]:
    """uvicorn's settings for `config`, but the app, the port and the logging."""
    return {
        "host": config.host,
        "log_level": log_level,
        "timeout_graceful_shutdown": int(config.shutdown_timeout),
        "timeout_keep_alive": config.idle_timeout_s,
        "h11_max_incomplete_event_size": config.max_header_bytes,
        "http": guarded_protocol(config),
        "lifespan": "on",
    }


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging configuration, with the library's loggers (`turnbon.serve`'s
    line per turn, and the rest) on uvicorn's handler at `log_level`."""
    settings = copy.deepcopy(LOGGING_CONFIG)
    level = LOG_LEVELS.get(log_level.lower(), log_level)
    for name in ("turnbon", "turnbon_graph"):
        settings["loggers"][name] = {"handlers": ["default"], "level": level, "propagate": False}
    return settings


class BackgroundServer:
    """`with BackgroundServer(config) as server:` serves `config` (or a ready `app`) on a
    daemon thread, on a free port of `config.host` unless `port` is given;
    `server.base_url` is its `/v1` address. Leaving the block stops it.

    Args:
        config: what to serve, and the server's limits.
        app: a ready app to serve instead of `create_app(config)`.
        port: the port to listen on; 0 picks a free one.
        log_level: uvicorn's log level.

    Raises:
        ConfigurationError: the engine cannot be made from `config`.
        RuntimeError: on entering the block, the server did not start within 30 s.
    """

    def __init__(
        self,
        config: ServeConfig,
        *,
        app: Starlette | None = None,
        port: int = 0,
        log_level: str = "warning",
    ) -> None:
        self.config = config
        app = app or create_app(config)
        self._server = uvicorn.Server(
            uvicorn.Config(app, port=port, **_settings(config, log_level))
        )
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BackgroundServer:
        self._thread = threading.Thread(target=self._server.run, name="turnbon-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"turnbon serve did not start on {self.config.host}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=self.config.shutdown_timeout + 10)

    @property
    def port(self) -> int:
        """The port the server listens on (raises `RuntimeError` when it is not running)."""
        sockets = [s for server in self._server.servers for s in server.sockets]
        if not sockets:
            raise RuntimeError("the server is not running")
        return int(sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        """`http://<host>:<port>/v1`, for an OpenAI client's `base_url` or `api_base`."""
        host = self.config.host or DEFAULT_HOST
        return f"http://{host}:{self.port}/v1"
