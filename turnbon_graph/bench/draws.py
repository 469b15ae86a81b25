"""Common random numbers: the settings of a run draw from the same seeds per task and
trial, so a difference between two settings is the strategies', not the draws'.

Each generator call of an episode carries a `seed` (the OpenAI completion parameter)
derived from the run's seed, the task, the trial, what the call asks (`request_key`: the
messages' roles, texts and tool calls, not tool outputs nor call ids, which differ from
run to run) and how many calls of the episode asked the same before it. So the same
request gets the same seed in every setting, the N identical requests of one turn get
different ones, and a setting's draws depend on its own calls alone: never on which other
settings share the run, nor on the order in which calls start or answers arrive. The
seed is sent only where LiteLLM says the provider takes it
(`get_supported_openai_params`), and never over a seed the call already has. A provider
that honours it (OpenAI's best effort, vLLM, the loopback stub of `turnbon bench --model
stub`) gives the same answers to the same calls; the others sample as they would.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from turnbon_graph._litellm.client import CallResult, CompletionClient
from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph.turn.engine import TurnEngine
from turnbon_graph.turn.generator import CandidateGenerator

SEED_RANGE = 2**31
"""Seeds are below this: what every provider that takes a seed accepts."""
_TAKES_SEED: dict[str, bool] = {}


def draw_stream(run_seed: int | None, task: str, trial: int) -> str:
    """The name of an episode's draws: the same for every setting of one task and trial."""
    return f"{run_seed}|{task}|{trial}"


def request_key(messages: Sequence[Any]) -> str:
    """What a request asks, as a digest of its OpenAI-format messages: each one's role,
    text and tool calls (names and arguments), a tool output's text and every id left
    out (they differ from run to run)."""
    shown = [
        [
            message.get("role"),
            "" if message.get("role") == "tool" else message.get("content"),
            [
                [(call.get("function") or {}).get(k) for k in ("name", "arguments")]
                for call in message.get("tool_calls") or []
            ],
        ]
        for message in messages
        if isinstance(message, dict)
    ]
    return hashlib.sha256(json.dumps(shown, default=str).encode()).hexdigest()


def call_seed(stream: str, key: str, count: int) -> int:
    """The seed of a generator call of the episode `stream` asking `key`
    (`request_key`), when `count` calls of the episode asked the same before it."""
    digest = hashlib.sha256(f"{stream}|{key}|{count}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_RANGE


async def takes_seed(model: str) -> bool:
    """Whether LiteLLM sends a `seed` to `model`'s provider (False for a model it does not
    know, such as a Router's model group)."""
    known = _TAKES_SEED.get(model)
    if known is None:
        litellm: Any = await load_litellm()
        litellm.suppress_debug_info = True  # an unknown provider prints a banner
        try:
            params = litellm.get_supported_openai_params(model=model)
        except Exception:  # an unknown provider is an error in some versions
            params = None
        known = _TAKES_SEED[model] = "seed" in (params or [])
    return known


class SeededClient:
    """A `CompletionClient` that gives each call of one episode its seed (`call_seed`)."""

    def __init__(self, inner: CompletionClient, stream: str) -> None:
        self.inner = inner
        self.stream = stream
        self.asked: dict[str, int] = {}
        """How many calls asked each request key so far."""

    async def complete(self, **kwargs: Any) -> CallResult:
        key = request_key(kwargs.get("messages") or [])
        # Counted before anything awaits; identical requests are interchangeable, so
        # which of them gets which count changes no draw.
        count = self.asked[key] = self.asked.get(key, 0) + 1
        if kwargs.get("seed") is None and await takes_seed(str(kwargs.get("model"))):
            kwargs["seed"] = call_seed(self.stream, key, count - 1)
        return await self.inner.complete(**kwargs)


def with_generator_client(
    engine: TurnEngine,
    wrap: Callable[[CompletionClient], CompletionClient],
    *,
    selector: Any | None = None,
) -> TurnEngine:
    """`engine` whose generator calls through `wrap(its client)` (and with `selector` in
    place of its own when given); the rest shared."""
    generator = engine.generator
    assert isinstance(generator, CandidateGenerator)  # what TurnEngine.from_options builds
    wrapped = copy.copy(generator)
    wrapped.client = wrap(generator.client)  # type: ignore[assignment]
    return TurnEngine(
        generator=wrapped,
        selector=selector if selector is not None else engine.selector,
        config=engine.config,
        trace=engine.trace,
    )


def seeded_engine(engine: TurnEngine, task: str, trial: int) -> TurnEngine:
    """`engine` for one episode of `task` and `trial`: its generator calls seeded."""
    stream = draw_stream(engine.config.seed, task, trial)
    return with_generator_client(engine, lambda client: SeededClient(client, stream))
