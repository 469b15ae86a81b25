"""Episodes shown live, for `turnbon demo` and `turnbon run`: the model backend, then each
trial through the episode driver, printed turn by turn.

By default the model is the embedded local one (SmolLM2-135M in llama.cpp, in-process, no
API key; the `local` extra) with prompted tool calls, and the selector is the same model
with a grammar-enforced JSON answer. `--model stub` plays a scripted stand-in on loopback
(no model at all: the mechanics only); any other value is a LiteLLM model id, its key in
the environment. Each turn prints the candidates, which one ran and why (the selector's
reason, unanimity, or a fallback), and the command's output; each episode ends with the
verifier's verdict (or how it ended without one) and the tokens used.

The task and the local model come from entry points (`turnbon.environments`,
`turnbon.local_models`), so the core imports no integration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from turnbon_graph.bench.agents import ReferenceAgent, as_expected
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.episode import EpisodeEnd, run_agent
from turnbon_graph.bench.reference import run_reference
from turnbon_graph.cli.models import (
    STUB_ID,
    check_credentials,
    make_selector,
    selector_kwargs,
    start_stub,
)
from turnbon_graph.cli.transcript import LiveTranscript
from turnbon_graph.cli.workdir import WorkdirNotes
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.base import Selector
from turnbon_graph.selectors.llm import LLMSelector
from turnbon_graph.turn.engine import TurnEngine

LOCAL_MODELS_GROUP = "turnbon.local_models"
"""Entry-point group of embedded model servers (turnbon_local registers `smollm2`)."""


@dataclass(frozen=True)
class LiveOptions:
    """How `turnbon demo` and `turnbon run` sample: which model and selector, how much."""

    model: str | None = None
    """A LiteLLM model id, "stub", or None for the embedded local model."""
    n: int = 4
    selector: str | None = None
    """first/random/majority, a LiteLLM model id, or None (an LLM selector on the model)."""
    max_turns: int | None = None
    """None: the task's own limit."""
    trials: int = 1
    seed: int = 0
    api_base: str | None = None
    selector_api_base: str | None = None
    temperature: float | None = None
    tool_calling: str | None = None
    """auto/native/prompted; None: prompted on the embedded model, auto otherwise."""
    timeout: float | None = None
    """Per model call, in seconds; None: the engine's default."""
    keep_workdir: bool = False
    """Keep a copy of each episode's working directory (else it is removed at the end)."""


async def run_live(
    environment: Environment, spec: TaskSpec, options: LiveOptions
) -> list[EpisodeEnd]:
    """Runs `options.trials` episodes of `spec`, printing every turn as it happens and
    how each episode ended; returns the ends (outcome None: a task with no verifier)."""
    if options.n < 1 or options.trials < 1:
        raise ConfigurationError("n and trials must be at least 1")
    max_turns = options.max_turns or spec.max_turns
    verify = bool(spec.metadata.get("verifier", True))
    ends: list[EpisodeEnd] = []
    with ExitStack() as stack:
        model_id, engine_options, backend = stack.enter_context(_model(options, environment))
        await asyncio.to_thread(  # it imports LiteLLM: off the event loop
            check_credentials,
            model_id,
            engine_options["completion_kwargs"],
            engine_options["selector"],
            engine_options.get("selector_kwargs"),
        )
        if options.timeout is not None:
            engine_options["timeout"] = options.timeout
        engine = TurnEngine.from_options(model_id, n=options.n, seed=options.seed, **engine_options)
        notes = WorkdirNotes(environment, keep=options.keep_workdir)
        where = f" ({spec.difficulty}, {spec.category})" if spec.difficulty else ""
        print(f"Task {spec.id}{where}:")
        print("  " + spec.instruction.strip().replace("\n", "\n  "))
        print(
            f"\nModel: {model_id} ({backend}); selector: {engine.selector.name}; "
            f"N={options.n}; at most {max_turns} turns\n"
        )
        for trial in range(options.trials):
            if options.trials > 1:
                gap = "\n" if trial else ""
                print(f"{gap}=== Trial {trial + 1} of {options.trials} ===\n")
            transcript = LiveTranscript()
            started = time.monotonic()
            end = await run_agent(
                notes,
                engine,
                spec,
                trial,
                max_turns=max_turns,
                on_state=transcript,
                verify=verify,
            )
            transcript.show_end(end, time.monotonic() - started)
            if (ran_in := notes.note()) is not None:
                print(ran_in)
            ends.append(end)
    if options.trials > 1 and verify:
        passed = sum(e.outcome == "pass" for e in ends)
        print(f"\nPassed {passed} of {len(ends)} trials")
    return ends


async def run_reference_live(
    environment: Environment,
    spec: TaskSpec,
    agent: ReferenceAgent,
    *,
    trials: int = 1,
    keep_workdir: bool = False,
) -> list[EpisodeEnd]:
    """Runs `trials` episodes of `spec` by a reference agent (`bench.reference`),
    printing what the solution printed and each verdict; returns the ends."""
    notes = WorkdirNotes(environment, keep=keep_workdir)
    what = "the task's solution/solve.sh" if agent == "oracle" else "nothing"
    print(f"Task {spec.id}: agent {agent} (runs {what}; no model)\n")
    ends: list[EpisodeEnd] = []
    for trial in range(trials):
        if trials > 1:
            gap = "\n" if trial else ""
            print(f"{gap}=== Trial {trial + 1} of {trials} ===\n")
        started = time.monotonic()
        end = await run_reference(notes, spec, trial, agent)
        for message in end.messages[1:]:  # what the solution printed
            print(str(message.content).strip())
        LiveTranscript().show_end(end, time.monotonic() - started)
        if (ran_in := notes.note()) is not None:
            print(ran_in)
        ends.append(end)
    if trials > 1:
        fine = sum(as_expected(e.outcome, agent) for e in ends)
        print(f"\n{fine} of {len(ends)} trials ended as on a sound task")
    return ends


def _entry_point(group: str, name: str) -> Any:
    found = {ep.name: ep for ep in entry_points(group=group)}
    if name not in found:
        raise ConfigurationError(
            f"no {name!r} in the entry points {group!r} (found: {', '.join(found) or 'none'}); "
            "install the project (pip install -e .) so its integrations are registered"
        )
    return found[name].load()


@contextmanager
def _model(
    options: LiveOptions, environment: Environment
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(model id, TurnEngine options, a description) for the chosen backend."""
    n, seed = options.n, options.seed
    selector = make_selector(options.selector, seed)
    sampling: dict[str, Any] = {}
    if options.temperature is not None:
        sampling["temperature"] = options.temperature
    mode = {"tool_calling": options.tool_calling} if options.tool_calling is not None else {}
    if options.model is None:
        server_class = _entry_point(LOCAL_MODELS_GROUP, "smollm2")
        with server_class(parallel=n) as server:
            endpoint = server.completion_kwargs()
            if selector is None:
                selector = LLMSelector(
                    server.model,
                    # The server enforces the answer's JSON schema by grammar.
                    completion_kwargs={**endpoint, "max_tokens": 200, "temperature": 0.0},
                    response_format=True,
                    max_reason_chars=160,
                    seed=seed,
                )
            generation = {**endpoint, "max_tokens": 96, "temperature": 0.9, **sampling}
            yield (
                server.model,
                {
                    "completion_kwargs": generation,
                    "tool_calling": "prompted",  # SmolLM2's chat template has no tools
                    **mode,
                    **_selector_options(selector, options, endpoint),
                },
                f"embedded SmolLM2-135M (llama.cpp, {n} slots)",
            )
        return
    if options.model == "stub":
        with ExitStack() as stack:
            endpoint = start_stub(environment, environment.name, stack, seed=seed)
            yield (
                STUB_ID,
                {
                    "completion_kwargs": {**endpoint, **sampling},
                    **mode,
                    **_selector_options(selector, options, endpoint),
                },
                "scripted stub on loopback",
            )
        return
    endpoint = {"api_base": options.api_base} if options.api_base else {}
    yield (
        options.model,
        {
            "completion_kwargs": {**endpoint, **sampling},
            **mode,
            **_selector_options(selector, options, {}),
        },
        "LiteLLM",
    )


def _selector_options(
    selector: str | Selector | None, options: LiveOptions, endpoint: dict[str, Any]
) -> dict[str, Any]:
    """The engine's selector options; `endpoint`: the generator's, when it is local."""
    kwargs = selector_kwargs(selector, endpoint, options.selector_api_base)
    return (
        {"selector": selector}
        if kwargs is None
        else {"selector": selector, "selector_kwargs": kwargs}
    )
