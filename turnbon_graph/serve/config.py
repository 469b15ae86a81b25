"""What `turnbon serve` runs: the inner model, its turn options (one `TurnConfig`), where
it listens and who may call it. Built by the command from flags and a TOML file, or by
hand for an app of your own (`create_app(ServeConfig(...))`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from turnbon_graph.config import TurnConfig
from turnbon_graph.errors import ConfigurationError

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MB", "ServeConfig"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MB = 1024 * 1024
"""The unit of `--max-body-mb`."""


@dataclass(frozen=True)
class ServeConfig:
    """One served model, and the server's limits."""

    model: str
    """The inner LiteLLM model id every turn samples from, on the connection in
    `turn.completion_kwargs` (`api_base`, `api_key`)."""
    turn: TurnConfig = field(default_factory=TurnConfig)
    """The turn's options (n, selector, ...)."""
    name: str = "turnbon"
    """The id `GET /v1/models` lists (requests may name any model: the answer is this
    one's)."""
    host: str = DEFAULT_HOST
    """The address to listen on."""
    port: int = DEFAULT_PORT
    """The port to listen on."""
    require_key: SecretStr | None = None
    """Clients must send `Authorization: Bearer <require_key>`; None: no key asked."""
    shutdown_timeout: float = 30.0
    """Seconds in-flight requests get to finish on SIGTERM/SIGINT before they are cancelled."""
    keepalive_s: float = 15.0
    """Seconds a streamed turn may run before its stream starts (status 200) and an SSE
    comment goes out every `keepalive_s`, so that proxies' and clients' read timeouts do
    not end long turns; a turn that fails sooner gets its own status. 0: never."""
    max_body_bytes: int = 10 * MB
    """A larger request body is a 413, refused before the rest of it is read. A chat
    body is text: a 128k-token transcript is well under 1 MB, so 10 MB leaves room for
    long contexts and a few inline images while bounding what one request may hold in
    memory (each request also fans out to N upstream calls). OpenAI's own limit is
    higher, for images and files sent inline: send those by URL, or raise this."""
    max_json_depth: int = 64
    """A body whose arrays and objects nest deeper is a 400; no chat body (a tool's
    JSON schema included) comes near it, and it keeps the parsing and everything after
    it far from Python's recursion limit."""
    header_timeout_s: float = 10.0
    """Seconds a connection may take to send a request's line and headers (from
    connecting, or from the request's first byte on a kept-alive connection) before it
    is closed. Clients send them at once; only a broken or hostile one takes longer."""
    body_timeout_s: float = 60.0
    """Seconds a request's body may take to arrive once its headers are in; a slower one
    is a 408 and the connection is closed. Even a 10 MB body over a slow link takes
    seconds; only a stalled or hostile client takes a minute."""
    max_header_bytes: int = 64 * 1024
    """Larger request headers get a 431 and the connection is closed."""
    idle_timeout_s: int = 5
    """Seconds an idle kept-alive connection stays open between requests (uvicorn's
    `timeout_keep_alive`, whose default this is)."""
    http: str = "auto"
    """uvicorn's HTTP protocol: "h11", "httptools" (uvicorn[standard]'s), or "auto"
    (httptools where it is installed), each with the header guard."""
    response_store: Path | None = None
    """A SQLite file (made if missing, in a folder that exists) that keeps the stored
    Responses API responses, shared by every `--workers` process and any server given
    the same file; None: in this process's memory."""
    response_store_bytes: int = 64 * MB
    """The stored responses' JSON text past which the oldest go. A stored response holds
    its whole conversation (a long agent run: some hundred KB), so 64 MiB keeps the
    recent turns of many runs in memory."""
    response_store_ttl_s: float = 24 * 3600.0
    """Seconds a stored response is kept (OpenAI keeps them 30 days): an agent run
    continues its chain within it; past it, a reference to the response is a miss."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ConfigurationError(
                "serve needs a model: a LiteLLM model id such as openai/gpt-4o-mini (--model)"
            )
        if not isinstance(self.turn, TurnConfig):
            raise ConfigurationError(f"turn must be a TurnConfig, got {self.turn!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port must be 0..65535, got {self.port}")
        if self.shutdown_timeout < 0:
            raise ConfigurationError("shutdown_timeout must be >= 0 seconds")
        if self.keepalive_s < 0:
            raise ConfigurationError("keepalive_s must be >= 0 seconds (0: no keep-alive)")
        for name in (
            "max_body_bytes",
            "max_json_depth",
            "max_header_bytes",
            "idle_timeout_s",
            "response_store_bytes",
        ):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.http not in ("auto", "h11", "httptools"):
            raise ConfigurationError(f"http must be auto, h11 or httptools, got {self.http!r}")
        if self.response_store is not None and not Path(self.response_store).parent.is_dir():
            raise ConfigurationError(
                f"the response store's folder {Path(self.response_store).parent} does not "
                "exist: create it, or give --response-store a path in a folder that does"
            )
        for name in ("header_timeout_s", "body_timeout_s", "response_store_ttl_s"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(
                    f"{name} must be above 0 seconds, got {getattr(self, name)}"
                )
