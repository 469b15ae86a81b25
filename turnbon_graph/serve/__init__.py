"""`turnbon serve`: Turn-BoN behind an OpenAI-compatible HTTP endpoint, for harnesses that
take a base URL (the `serve` extra: Starlette and uvicorn).

    from turnbon_graph.serve import BackgroundServer, ServeConfig

    with BackgroundServer(ServeConfig(model="openai/gpt-4o-mini", turn=turn_config(n=4))) as s:
        OpenAI(base_url=s.base_url, api_key="none").chat.completions.create(...)

`config` holds what is served, `app` the endpoints, `runner` how uvicorn runs them.
"""

from __future__ import annotations

from turnbon_graph.serve.app import create_app
from turnbon_graph.serve.config import ServeConfig
from turnbon_graph.serve.runner import BackgroundServer, run_server

__all__ = ["BackgroundServer", "ServeConfig", "create_app", "run_server"]
