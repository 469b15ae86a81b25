"""Running the app under uvicorn: in the foreground (`turnbon serve`: uvicorn's own
SIGTERM/SIGINT handling, in-flight requests finished within the shutdown timeout, then
cancelled), or on a background thread (`BackgroundServer`: tests, benchmarks, notebooks).
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

import uvicorn
from starlette.applications import Starlette

from turnbon_graph.serve.app import create_app
from turnbon_graph.serve.config import DEFAULT_HOST, ServeConfig

__all__ = ["BackgroundServer", "run_server"]


def run_server(
    config: ServeConfig,
    *,
    log_level: str = "info",
    workers: int = 1,
    factory: str | None = None,
) -> None:
    """Serves `config` until SIGTERM or SIGINT; with `workers` > 1, in that many
    processes on the one port (uvicorn's own workers), each app made by `factory` (an
    import string "module:function" that builds it afresh in the worker)."""
    if workers > 1:
        if factory is None:
            raise ValueError("several workers need a factory: each builds its own app")
        uvicorn.run(
            factory,
            factory=True,
            workers=workers,
            host=config.host,
            port=config.port,
            log_level=log_level,
            timeout_graceful_shutdown=int(config.shutdown_timeout),
            lifespan="on",
        )
        return
    server = uvicorn.Server(_uvicorn_config(create_app(config), config, log_level))
    server.run()


def _uvicorn_config(
    app: Starlette, config: ServeConfig, log_level: str, port: int | None = None
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port if port is None else port,
        log_level=log_level,
        timeout_graceful_shutdown=int(config.shutdown_timeout),
        lifespan="on",
    )


class BackgroundServer:
    """`with BackgroundServer(config) as server:` serves `config` (or a ready `app`) on a
    daemon thread, on a free port of `config.host` unless `port` is given;
    `server.base_url` is its `/v1` address. Leaving the block stops it."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        app: Starlette | None = None,
        port: int = 0,
        log_level: str = "warning",
    ) -> None:
        self.config = config
        settings = _uvicorn_config(app or create_app(config), config, log_level, port)
        self._server = uvicorn.Server(settings)
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=self.config.shutdown_timeout + 10)

    @property
    def port(self) -> int:
        sockets = [s for server in self._server.servers for s in server.sockets]
        if not sockets:
            raise RuntimeError("the server is not running")
        return int(sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        """`http://<host>:<port>/v1`, for an OpenAI client's `base_url` or `api_base`."""
        host = self.config.host or DEFAULT_HOST
        return f"http://{host}:{self.port}/v1"
