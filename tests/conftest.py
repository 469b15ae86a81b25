"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Must run before anything imports litellm: without it litellm fetches the model cost
# map from the internet at import time and stalls in the sandbox.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The package is not necessarily installed into the venv; plain `pytest` does not put
# the project root on sys.path, so add it when the import would otherwise fail.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    try:
        import turnbon_graph  # noqa: F401
    except ModuleNotFoundError:
        sys.path.insert(0, _ROOT)

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from turnbon_graph.testing import StubServer  # noqa: E402


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """A started loopback OpenAI-compatible stub server, stopped after the test."""
    with StubServer() as server:
        yield server


LONGEST_FILE = "test_ray_runner.py"
"""The file that takes the longest, about a third of the run on one worker: run on several
workers (`make test`: `-n 2 --dist loadfile`, a file to each), it goes first, so that it
does not start last and leave the other workers idle while it runs."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Moves the longest file's tests to the front, keeping every other order."""
    items.sort(key=lambda item: item.path.name != LONGEST_FILE)
