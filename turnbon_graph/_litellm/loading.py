"""Importing LiteLLM: once, off the event loop, with its bundled price map.

`import litellm` takes seconds and makes blocking calls, so it is never done at import
time nor inside a coroutine on the loop: `load_litellm` runs it on a thread the first
time, `import_litellm` for code off any loop (`quiet_litellm`: without LiteLLM's help
banner, for look-ups whose failures are ours to explain).
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from types import ModuleType
from typing import Any

from turnbon_graph._litellm.price_map import use_bundled_price_map

_litellm: ModuleType | None = None


_importing = threading.Lock()


def _import_litellm() -> ModuleType:
    global _litellm
    with _importing:  # one import at a time, so none sees a half-initialised module
        if _litellm is None:
            use_bundled_price_map()
            _litellm = importlib.import_module("litellm")
    return _litellm


def import_litellm() -> ModuleType:
    """LiteLLM, imported here and now if it is not yet (with the bundled price map,
    `use_bundled_price_map`); for code off any event loop (`load_litellm` on one)."""
    return _litellm if _litellm is not None else _import_litellm()


def quiet_litellm() -> Any:
    """`import_litellm`, with LiteLLM's help banner off (`suppress_debug_info`, which the
    client sets for its calls too): asked about a name it cannot route (a LangChain chat
    model's, say), LiteLLM prints a red "Provider List" banner before it raises, and our
    callers answer that failure themselves."""
    litellm: Any = import_litellm()
    litellm.suppress_debug_info = True
    return litellm


async def load_litellm() -> ModuleType:
    """LiteLLM, imported off the event loop the first time. Importing it takes seconds and
    makes blocking calls (files, os.getcwd) that would stall every coroutine of the loop,
    and that LangGraph Server refuses; afterwards a plain `import litellm` is free."""
    if _litellm is not None:
        return _litellm
    return await asyncio.to_thread(_import_litellm)
