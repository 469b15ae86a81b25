"""`turnbon serve`: an OpenAI-compatible HTTP server whose every chat completion is one Turn-BoN
turn (`turnbon_graph.serve`, the `serve` extra). Settings come from flags, then a TOML --config file
with the same names (snake_case), then defaults; every turn option is a `TurnConfig` field, given by
name (`-o max_concurrency=8` or in the file), so none is declared here a second time. `--model stub`
serves a scripted stand-in (`serve.stub`) on a loopback stub server that lives as long as the
command. Starlette, uvicorn and LiteLLM load only in `run`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.shared import SHARED, add_flags
from turnbon_graph.cli.flags.values import INTERRUPTED, STUB_MODEL
from turnbon_graph.cli.serve.options import SETTINGS, add_server_flags
from turnbon_graph.cli.serve.store import store_config, warn_unshared_store
from turnbon_graph.cli.serve.stub import stub_endpoint

_TURN_FLAGS = ("n", "seed", "timeout", "tool_calling")
"""Turn options that are also shared flags of the other commands."""

EPILOG = (
    "Turn options: every other TurnConfig option (docs/options.md) by name, "
    "with -o NAME=VALUE (repeatable) or in the --config file: -o max_concurrency=8 "
    "-o rate_limit=5 -o 'adaptive={\"first_batch\": 2}'. A VALUE is read as JSON (numbers, "
    "true/false, lists, objects), else as a string. Upstream keys come from the "
    "environment (OPENAI_API_KEY, ...) or --api-key-env; neither is ever logged. "
    "On SIGTERM or SIGINT in-flight requests finish (up to --shutdown-timeout), then the "
    "process ends by that signal (SIGINT: exit code 130). Exit codes: 1 the server could "
    "not start; 2 bad input (a bad flag, option or --config file). --model stub serves a "
    "scripted stand-in on loopback (no model, no key, no network): each candidate is a "
    "numbered draft (1 to N) echoing the last user message; the selector takes the first it "
    "is shown."
)

WORKER_ARGV = "TURNBON_SERVE_ARGV"
"""The command line a `--workers` process builds its app from (never a secret: keys come
from the environment the workers inherit)."""


def add_parser(commands: Any) -> None:
    """Adds `turnbon serve` and its flags to `commands`."""
    parser = command_parser(commands, "serve", epilog=EPILOG)
    serve_arguments(parser)
    parser.set_defaults(handler=run)


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    """`turnbon serve`'s flags."""
    parser.add_argument("--config", type=Path, metavar="FILE", help="a TOML file of these settings")
    SHARED["model"].add(
        parser,
        help="the LiteLLM model id every turn samples from (e.g. openai/gpt-4o-mini), or "
        "'stub': a scripted stand-in on loopback (no API key, no network)",
    )
    add_flags(parser, "api_base", "n", "selector", "selector_api_base", "seed")
    add_flags(parser, "temperature", "tool_calling", "timeout")
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        metavar="NAME=VALUE",
        help="a turn option by name (see below)",
    )
    add_server_flags(parser)


def run(args: argparse.Namespace) -> int:
    """`turnbon serve`: serves until SIGTERM or SIGINT (with `--model stub`, the stub
    serves as long)."""
    from turnbon_graph.cli.models import check_credentials

    with ExitStack() as stack:
        config, settings = serve_config(args, stack)
        workers = settings["workers"]
        from turnbon_graph.serve import run_server

        turn = config.turn
        check_credentials(
            config.model, dict(turn.completion_kwargs or {}), turn.selector, turn.selector_kwargs
        )
        if config.response_store is not None:  # one that cannot open is said before the banner
            from turnbon_graph.serve.state import open_store

            open_store(config).close()
        stub = " (the scripted stub)" if settings["model"] == STUB_MODEL else ""
        print(
            f"turnbon serve: {config.model}{stub} (n={config.turn.n}) as {config.name!r} on "
            + (
                f"http://{config.host}:{config.port}/v1"
                if config.port
                else f"a free port of {config.host} (uvicorn's line names it)"
            )
            + (f", {workers} worker processes" if workers > 1 else ""),
            file=sys.stderr,
        )
        warn_unshared_store(config, workers)
        os.environ[WORKER_ARGV] = json.dumps(list(getattr(args, "argv", None) or []))
        try:
            run_server(
                config,
                log_level=settings["log_level"],
                access_log=settings["access_log"],
                workers=workers,
                factory=f"{__name__}:worker_app",
            )
        except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it caught, once it has stopped
            return INTERRUPTED
    return 0


def worker_app() -> Any:
    """The app of one `--workers` process, built from the command line it was started
    with (`WORKER_ARGV`), as the parent built its own."""
    from turnbon_graph.serve import create_app
    from turnbon_graph.serve.runner import freeze_long_lived

    argv = json.loads(os.environ[WORKER_ARGV])  # ["serve", flags...]
    parser = argparse.ArgumentParser(prog="turnbon serve")
    serve_arguments(parser)
    args = parser.parse_args(argv[1:])
    args.argv = argv
    app = create_app(serve_config(args)[0])
    freeze_long_lived()
    return app


def serve_config(
    args: argparse.Namespace, stack: ExitStack | None = None
) -> tuple[Any, dict[str, Any]]:
    """The `ServeConfig` of the command line (and its --config file), and the settings
    (`SETTINGS`: how many worker processes serve it, the logging, ...). `--model stub`
    starts the stub, stopped with `stack` (a `--workers` process, given none, uses its
    parent's, `serve.stub.WORKER_STUB`)."""
    from turnbon_graph.errors import ConfigurationError

    settings, options = serve_settings(args)
    try:
        from turnbon_graph.serve import ServeConfig
        from turnbon_graph.serve.config import MB
    except ImportError as exc:
        from turnbon_graph._extras import install_hint

        raise ConfigurationError(
            f"turnbon serve needs the serve extra ({exc.name} is missing): " + install_hint("serve")
        ) from None
    model, local = settings["model"], None
    if model == STUB_MODEL:
        model, local = stub_endpoint(settings, options, stack)
    config = ServeConfig(
        model=model,
        turn=turn_settings(settings, options, local),
        name=settings["name"],
        host=settings["host"],
        port=settings["port"],
        require_key=_secret(settings["require_key_env"], "--require-key-env"),
        shutdown_timeout=settings["shutdown_timeout"],
        keepalive_s=settings["keepalive_s"],
        max_body_bytes=int(settings["max_body_mb"] * MB),
        header_timeout_s=settings["header_timeout_s"],
        body_timeout_s=settings["body_timeout_s"],
        idle_timeout_s=settings["idle_timeout_s"],
        **store_config(settings),
    )
    return config, settings


def serve_settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The server's settings and the turn options: flags over the --config file over the
    defaults (the file's values become the parser's defaults, and the command line is
    read again)."""
    from turnbon_graph.errors import ConfigurationError

    values = _config_file(args.config) if args.config is not None else {}
    argv: list[str] = list(getattr(args, "argv", None) or [])
    if values and argv[:1] == ["serve"]:
        parser = argparse.ArgumentParser(prog="turnbon serve")
        serve_arguments(parser)
        parser.set_defaults(**{k: v for k, v in values.items() if k in (*SETTINGS, *_TURN_FLAGS)})
        args = parser.parse_args(argv[1:])
    settings = {name: getattr(args, name) for name in SETTINGS}
    if not settings["model"]:
        raise ConfigurationError(
            "serve needs --model (a LiteLLM model id, e.g. openai/gpt-4o-mini), or `model` "
            "in the --config file"
        )
    options = {k: v for k, v in values.items() if k not in (*SETTINGS, *_TURN_FLAGS)}
    options.update({name: getattr(args, name) for name in _TURN_FLAGS})
    for given in args.option or ():
        name, sep, text = given.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"-o takes NAME=VALUE, got {given!r}")
        try:
            options[name.strip()] = json.loads(text)
        except ValueError:
            options[name.strip()] = text
    return settings, {k: v for k, v in options.items() if v is not None}


def turn_settings(
    settings: dict[str, Any], options: dict[str, Any], local: dict[str, Any] | None = None
) -> Any:
    """The `TurnConfig` the server runs: the turn options, with the generator's
    connection (--api-base, the --api-key-env key, --temperature; or `local`, the stub's)
    and the selector (on the stub too, when it is a model id)."""
    from turnbon_graph.cli.models import make_selector, selector_kwargs
    from turnbon_graph.config import turn_config
    from turnbon_graph.errors import ConfigurationError

    completion = dict(options.pop("completion_kwargs", None) or {})
    connection = {
        "api_base": settings["api_base"],
        "api_key": _secret(settings["api_key_env"], "--api-key-env", reveal=True),
        "temperature": settings["temperature"],
    }
    completion.update({k: v for k, v in connection.items() if v is not None})
    completion.update(local or {})
    selector = make_selector(settings["selector"], options.get("seed"))
    kwargs = selector_kwargs(selector, local, settings["selector_api_base"])
    if kwargs is not None:
        options["selector_kwargs"] = {**(options.get("selector_kwargs") or {}), **kwargs}
    if "selector" in options:
        raise ConfigurationError("give the selector with --selector (or `selector` in the file)")
    return turn_config(selector=selector, completion_kwargs=completion or None, **options)


def _secret(env: str | None, flag: str, *, reveal: bool = False) -> Any:
    """The value of environment variable `env` (a `SecretStr` unless `reveal`), or None."""
    from pydantic import SecretStr

    from turnbon_graph.errors import ConfigurationError

    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise ConfigurationError(f"{flag} {env}: {env} is not set in the environment; set it")
    return value if reveal else SecretStr(value)


def _config_file(path: Path) -> dict[str, Any]:
    import tomllib

    from turnbon_graph.errors import ConfigurationError

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"no config file at {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from None
