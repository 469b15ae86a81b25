"""From the model and selector flags to a TurnEngine's options: selector names, the
selector's connection, the loopback stub that plays `--model stub`; and the checks made
before anything runs, that LiteLLM can route each model id and has its key."""

from __future__ import annotations

import argparse
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.cli.flags.run_folder import default_run_dir
from turnbon_graph.cli.flags.values import SELECTOR_KEYWORDS, STUB_MODEL

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
    from turnbon_graph.cli.flags.shared import environment_options

    selector = make_selector(args.selector, args.seed)
    refuse_ignored_flags(args, selector)
    environment = load_environment(args.env, args.tasks, options=environment_options(args))
    check_model_ids(
        args.model, selector, api_base=args.api_base, selector_api_base=args.selector_api_base
    )
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


def check_model_ids(
    model: str | None,
    selector: object = None,
    *,
    api_base: str | None = None,
    selector_api_base: str | None = None,
) -> None:
    """Refuses, before anything runs (no server started, no run folder, no task shown), a
    `--model` or a `--selector` model id that LiteLLM cannot route (`check_routes`).
    LiteLLM is imported only when there is a model id to check: not for the stub, the
    embedded model or a selector that calls no model."""
    checks: list[tuple[str, str, dict[str, Any]]] = []
    if model is not None and model not in (STUB_MODEL, STUB_ID):
        checks.append(("the model", model, {"api_base": api_base} if api_base else {}))
    if isinstance(selector, str):
        kwargs = {"api_base": selector_api_base} if selector_api_base else {}
        checks.append(("the selector", selector, kwargs))
    if checks:
        litellm = _litellm()
        for what, name, kwargs in checks:
            check_route(litellm, what, name, kwargs)


def _litellm() -> Any:
    from turnbon_graph._litellm.loading import quiet_litellm

    return quiet_litellm()  # no provider-list banner for an unknown model id: we explain it


def check_route(
    litellm: Any, what: str, name: str, kwargs: dict[str, Any], router: Any = None
) -> None:
    """Refuses model id `name` (`what`: "the model" or "the selector") when LiteLLM
    cannot tell its provider, as its completion call would (`get_llm_provider`, with the
    call's api_base and custom_llm_provider): every call of the run would fail with "LLM
    Provider NOT provided". Says what was probably meant: the closest provider LiteLLM
    knows for an unknown prefix (`opnai/...`: openai/...), the closest model it knows
    for a bare name, the closest selector keyword for the selector. A model group of
    `router` passes (the Router routes it)."""
    from turnbon_graph.errors import ConfigurationError

    if router is not None and name in router_groups(router):
        return
    problem = route_problem(litellm, name, kwargs)
    if problem is None:
        return
    reason, meant = problem
    if what == "the selector":
        close = difflib.get_close_matches(name.lower(), SELECTOR_KEYWORDS, n=1, cutoff=0.5)
        guesses = [*close, *meant]
        raise ConfigurationError(
            f"the selector {name} is neither a selector that calls no model "
            f"({', '.join(SELECTOR_KEYWORDS)}) nor a model id LiteLLM can route (it {reason})"
            + (f": did you mean {' or '.join(guesses)}?" if guesses else "")
            + f" {MODEL_ID_FORM}"
        )
    raise ConfigurationError(
        f"the model {name} {reason}"
        + (f": did you mean {' or '.join(meant)}?" if meant else "")
        + f" {MODEL_ID_FORM}"
    )


MODEL_ID_FORM = (
    "(a LiteLLM model id is PROVIDER/MODEL, e.g. openai/gpt-4o-mini or "
    "anthropic/claude-sonnet-4-5; for a server of your own, hosted_vllm/NAME, ollama/NAME "
    "or openai/NAME with --api-base URL)"
)


def route_problem(litellm: Any, name: str, kwargs: dict[str, Any]) -> tuple[str, list[str]] | None:
    """None when LiteLLM routes model id `name` with these call settings; else why not,
    and the routable ids that were probably meant (closest first)."""
    model = (litellm.model_alias_map or {}).get(name, name)
    if _routes(litellm, model, kwargs):
        return None
    prefix, slash, rest = name.partition("/")
    if slash:
        providers = [str(getattr(p, "value", p)) for p in litellm.provider_list]
        close = difflib.get_close_matches(prefix.lower(), providers, n=1)
        meant = [f"{p}/{rest}" for p in close if _routes(litellm, f"{p}/{rest}", kwargs)]
        return f"names {prefix!r}, a provider LiteLLM does not know", meant
    known = [
        key
        for key, info in litellm.model_cost.items()
        if "/" not in key and isinstance(info, dict) and info.get("mode") == "chat"
    ]
    close = difflib.get_close_matches(name, known, n=1)
    meant = [m for m in close if _routes(litellm, m, kwargs)]
    return "has no provider prefix, and LiteLLM knows no model of that name", meant


def _routes(litellm: Any, model: str, kwargs: dict[str, Any]) -> bool:
    try:
        litellm.get_llm_provider(
            model=model,
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base"),
        )
    except Exception:  # LiteLLM's BadRequestError "LLM Provider NOT provided", or any other
        return False
    return True


def router_groups(router: Any) -> frozenset[str]:
    """The model groups a `litellm.Router` routes (`client.router_groups`)."""
    from turnbon_graph._litellm.client import router_groups as groups

    return groups(router)


def check_credentials(
    model: str,
    completion_kwargs: dict[str, Any],
    selector: object = None,
    selector_kwargs: dict[str, Any] | None = None,
    *,
    router: Any = None,
) -> None:
    """Refuses, before anything runs, a model (the generator, or the selector's model id)
    that LiteLLM cannot route (`check_route`), or whose provider takes an API key from
    the environment when none is set and none is passed (`api_key`): otherwise every
    call of the run fails, and a bench run records every episode as an agent error,
    which a rerun then resumes past. LiteLLM's `validate_environment` names the
    provider's variables; only providers that need a `*_API_KEY` are refused (AWS,
    Vertex or Ollama credentials come from elsewhere too). A model group of `router`
    is the Router's to route and key."""
    from turnbon_graph.errors import ConfigurationError

    litellm = _litellm()
    checks = [("the model", model, completion_kwargs)]
    if isinstance(selector, str):
        checks.append(("the selector", selector, selector_kwargs or {}))
    for what, name, kwargs in checks:
        check_route(litellm, what, name, kwargs, router)
        if kwargs.get("api_key") or (router is not None and name in router_groups(router)):
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
    # the latest request only: nothing reads its log, and `serve --model stub` runs for long
    server = stack.enter_context(StubServer(max_log_bytes=0))
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
