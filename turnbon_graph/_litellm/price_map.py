"""Which price map LiteLLM reads: the one bundled with it, chosen when `turnbon_graph` is
imported, so that a later `import litellm` (ours or the user's) reads it too.

Only the standard library: the package root calls `use_bundled_price_map` on import, and
`turnbon --help` must stay quick.
"""

from __future__ import annotations

import os


def use_bundled_price_map() -> None:
    """Makes LiteLLM read the price map bundled with it instead of fetching the newest one
    from the internet when it is imported (a network call at import stalls offline and
    sandboxed runs). A choice made in the environment stands: set
    `LITELLM_LOCAL_MODEL_COST_MAP=False` to let LiteLLM fetch it. LiteLLM reads the
    variable once, when it is imported: a program that imports LiteLLM before
    `turnbon_graph` sets it itself."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
