"""From the model and selector flags to a TurnEngine's options: selector names, the
selector's connection, the loopback stub that plays `--model stub`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.cli.arguments import STUB_MODEL, default_run_dir

if TYPE_CHECKING:
    from contextlib import ExitStack

    from turnbon_graph.bench.environment import Environment
    from turnbon_graph.selectors.base import Selector

STUB_ID = "openai/stub"
"""The LiteLLM model id the loopback stub answers as."""


@dataclass(frozen=True)
class EpisodeSetup:
    """What the episode flags (`episode_arguments`) name, checked."""

    selector: str | Selector | None
    environment: Environment
    model: str
    """The LiteLLM model id (the stub's for --model stub)."""
    run_dir: Path
    """--run, or a new folder under runs/."""


def episode_setup(args: argparse.Namespace, *, kind: str | None = None) -> EpisodeSetup:
    """The selector, the environment, the model id and the run folder (named
    `<env>-<kind>-<model>-<time>` by default) of a command that runs episodes."""
    from turnbon_graph.bench.registry import load_environment

    selector = make_selector(args.selector, args.seed)
    refuse_ignored_flags(args, selector)
    environment = load_environment(args.env, args.tasks)
    name = f"{args.env}-{kind}" if kind else args.env
    return EpisodeSetup(
        selector=selector,
        environment=environment,
        model=STUB_ID if args.model == STUB_MODEL else args.model,
        run_dir=args.run or default_run_dir(name, args.model),
    )


def make_selector(name: str | None, seed: int | None = None) -> str | Selector | None:
    """first/random/majority -> that selector; any other name is a LiteLLM model id for
    an LLMSelector (built by the engine, so it shares its client); None -> the default."""
    from turnbon_graph.selectors.simple import (
        FirstSelector,
        MajorityVoteSelector,
        RandomSelector,
    )

    if name == "first":
        return FirstSelector()
    if name == "random":
        return RandomSelector(seed)
    if name == "majority":
        return MajorityVoteSelector()
    return name


def selector_kwargs(
    selector: str | Selector | None,
    local_endpoint: dict[str, Any] | None,
    selector_api_base: str | None,
) -> dict[str, Any] | None:
    """The connection of a selector model id: `selector_api_base` if given, else the
    generator's endpoint when it is local (the stub, the embedded model), where there is no
    other; else None (it may be another provider: LiteLLM finds its own). Refuses
    `selector_api_base` for a selector that calls no model id."""
    from turnbon_graph.errors import ConfigurationError

    if not isinstance(selector, str):
        if selector_api_base:
            raise ConfigurationError(
                "--selector-api-base applies only to a selector model id; pass --selector MODEL"
            )
        return None
    if selector_api_base:
        return {"api_base": selector_api_base}
    return dict(local_endpoint) if local_endpoint else None


def refuse_ignored_flags(args: argparse.Namespace, selector: str | Selector | None) -> None:
    """Connection flags that would have no effect are an error, not silently dropped."""
    from turnbon_graph.errors import ConfigurationError

    selector_kwargs(selector, None, args.selector_api_base)  # refuses a useless flag
    if args.api_base and args.model == STUB_MODEL:
        raise ConfigurationError(
            "--api-base has no effect with --model stub (the stub serves on loopback); "
            "drop it, or name a real model"
        )
    for name in ("cluster_max_concurrency", "cluster_rate_limit"):
        if getattr(args, name, None) is not None and getattr(args, "ray", None) is None:
            flag = "--" + name.replace("_", "-")
            raise ConfigurationError(
                f"{flag} limits calls across Ray workers: add --ray (on one process, "
                "-o max_concurrency=... / rate_limit=... of the engine bound its calls)"
            )


def check_credentials(
    model: str,
    completion_kwargs: dict[str, Any],
    selector: object = None,
    selector_kwargs: dict[str, Any] | None = None,
) -> None:
    """Refuses, before anything runs, a model (the generator, or the selector's model id)
    whose provider takes an API key from the environment when none is set and none is
    passed (`api_key`): otherwise every call of the run fails, and a bench run records
    every episode as an agent error, which a rerun then resumes past. LiteLLM's
    `validate_environment` names the provider's variables; only providers that need a
    `*_API_KEY` are refused (AWS, Vertex or Ollama credentials come from elsewhere too)."""
    import litellm

    from turnbon_graph.errors import ConfigurationError

    litellm.suppress_debug_info = True  # its provider-list banner for an unknown model id
    checks = [("the model", model, completion_kwargs)]
    if isinstance(selector, str):
        checks.append(("the selector", selector, selector_kwargs or {}))
    for what, name, kwargs in checks:
        if kwargs.get("api_key"):
            continue
        found = litellm.validate_environment(model=name, api_base=kwargs.get("api_base"))
        missing: list[str] = found.get("missing_keys") or []
        if found.get("keys_in_environment") or not missing:
            continue
        if all(key.endswith("_API_KEY") for key in missing):
            raise ConfigurationError(
                f"{what} {name} needs {' or '.join(missing)}, which is not set: export it "
                "before running (a server of your own that checks no key takes any value)"
            )


def check_run_credentials(
    args: argparse.Namespace, model: str, selector: str | Selector | None, options: dict[str, Any]
) -> None:
    """`check_credentials` for the engine options (`engine_options`) of a run here or on
    this machine's Ray; a cluster's workers hold keys of their own."""
    if getattr(args, "ray", None) in (None, "local"):
        kwargs = options["completion_kwargs"]
        check_credentials(model, kwargs, selector, options.get("selector_kwargs"))


def start_stub(
    environment: object, name: str, stack: ExitStack, *, seed: int | None = None
) -> dict[str, Any]:
    """A loopback stub scripted by the environment's own policy (seeded when `seed` is
    given and the policy takes one), stopped with `stack`; its connection options."""
    from turnbon_graph.errors import ConfigurationError
    from turnbon_graph.testing import StubServer

    policy = getattr(environment, "stub_policy", None)
    if not callable(policy):
        raise ConfigurationError(
            f"environment {name!r} has no stub policy (a stub_policy() method), so --model "
            "stub cannot play its model; pass a LiteLLM model id instead, e.g. "
            "--model openai/gpt-4o-mini"
        )
    import inspect

    seeded = seed is not None and "seed" in inspect.signature(policy).parameters
    server = stack.enter_context(StubServer())
    server.script(policy(seed=seed) if seeded else policy())
    return {"api_base": server.base_url, "api_key": "none"}


def connection(args: argparse.Namespace, environment: object, stack: ExitStack) -> dict[str, Any]:
    """The generator's connection options: the stub's (seeded by --seed), or --api-base's."""
    if args.model == STUB_MODEL:
        return start_stub(environment, args.env, stack, seed=args.seed)
    return {"api_base": args.api_base} if args.api_base else {}


def engine_options(
    args: argparse.Namespace, selector: str | Selector | None, connection: dict[str, Any]
) -> dict[str, Any]:
    """`TurnEngine.from_options` keywords from the episode flags (`episode_arguments`)."""
    options: dict[str, Any] = {"completion_kwargs": dict(connection)}
    if args.temperature is not None:
        options["completion_kwargs"]["temperature"] = args.temperature
    if args.tool_calling is not None:
        options["tool_calling"] = args.tool_calling
    local = connection if args.model == STUB_MODEL else None
    if (kwargs := selector_kwargs(selector, local, args.selector_api_base)) is not None:
        options["selector_kwargs"] = kwargs
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.seed is not None:
        options["seed"] = args.seed
    return options
