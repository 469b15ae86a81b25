"""The public import paths, held still: a module moving inside the package must not move
a name users import. Each name is listed with the module that defines it, so a move is a
deliberate edit here, not an accident."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import import_module

import pytest

import turnbon_graph

TOP_LEVEL = {
    "AdaptiveN": "turnbon_graph.sampling",
    "AllCandidatesFailedError": "turnbon_graph.errors",
    "Budget": "turnbon_graph.sampling",
    "Candidate": "turnbon_graph.candidates",
    "CandidateRecord": "turnbon_graph.records",
    "ChatTurnBoN": "turnbon_graph.chat.model",
    "ConfigurationError": "turnbon_graph.errors",
    "CredentialsError": "turnbon_graph.errors",
    "EarlyCommit": "turnbon_graph.sampling",
    "EnsembleSelector": "turnbon_graph.selectors.ensemble",
    "FirstSelector": "turnbon_graph.selectors.simple",
    "FusionSelector": "turnbon_graph.selectors.fusion",
    "HumanSelector": "turnbon_graph.selectors.human",
    "JSONLTraceSink": "turnbon_graph.records",
    "LLMSelector": "turnbon_graph.selectors.llm",
    "MajorityVoteSelector": "turnbon_graph.selectors.simple",
    "ModelSpec": "turnbon_graph.generate",
    "RandomSelector": "turnbon_graph.selectors.simple",
    "RefineSelector": "turnbon_graph.selectors.refine",
    "ScoringSelector": "turnbon_graph.selectors.scoring",
    "Selection": "turnbon_graph.selectors.base",
    "Selector": "turnbon_graph.selectors.base",
    "TournamentSelector": "turnbon_graph.selectors.tournament",
    "TraceSink": "turnbon_graph.records",
    "TurnBoNError": "turnbon_graph.errors",
    "TurnBoNMiddleware": "turnbon_graph.middleware",
    "TurnBoNState": "turnbon_graph.graph",
    "TurnConfig": "turnbon_graph.config",
    "TurnEngine": "turnbon_graph.turn",
    "TurnRecord": "turnbon_graph.records",
    "Usage": "turnbon_graph.records",
    "UsageSplit": "turnbon_graph.records",
    "canonical_action": "turnbon_graph.candidates",
    "create_turnbon_agent": "turnbon_graph.graph",
    "create_turnbon_graph": "turnbon_graph.graph",
    "turn_record": "turnbon_graph.turn",
}
"""Every name of `turnbon_graph.__all__`, with the module that defines it."""

SUBPACKAGES = {
    "turnbon_graph.chat": ["ChatTurnBoN", "EVENT_NAME"],
    "turnbon_graph.selectors": [
        "EnsembleSelector",
        "FirstSelector",
        "FusionSelector",
        "HumanSelector",
        "LLMSelector",
        "MajorityVoteSelector",
        "RandomSelector",
        "RefineSelector",
        "ScoringSelector",
        "Selection",
        "Selector",
        "TournamentSelector",
    ],
    "turnbon_graph.testing": ["StubServer", "chat_completion", "is_selector_request", "tool_call"],
    "turnbon_graph.serve": ["BackgroundServer", "ServeConfig", "create_app", "run_server"],
}
"""Each subpackage's names as the README and docs import them."""

MODULES = {
    "turnbon_graph.bench.runner": ["BenchConfig", "run_benchmark"],
    "turnbon_graph.bench.ray_runner": ["RayOptions", "RegisteredEnvironment"],
    "turnbon_graph.bench.environment": ["Environment", "Episode", "TaskSpec", "Verdict"],
    "turnbon_graph.bench.metrics": ["consistency_curve", "cost_table", "pass_at_k"],
    "turnbon_graph.bench.runs": ["read_episodes"],
    "turnbon_graph.chat_client": ["ChatModelClient", "chat_model_label", "usage_of_message"],
    "turnbon_graph.config": ["turn_config"],
    "turnbon_graph.litellm_provider": ["TurnBoNProvider", "register", "turnbon_record"],
    "turnbon_graph.sync": ["run_sync"],
}
"""Modules the README, docs/ray.md and the integrations' READMEs import names from."""


def test_the_package_exports_exactly_the_listed_names() -> None:
    assert sorted(turnbon_graph.__all__) == sorted(TOP_LEVEL)
    assert dir(turnbon_graph) == sorted(turnbon_graph.__all__)


@pytest.mark.parametrize("name", sorted(TOP_LEVEL))
def test_a_public_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(turnbon_graph, name)
    home = import_module(TOP_LEVEL[name])
    assert value is getattr(home, name)
    assert value.__module__ == TOP_LEVEL[name]


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from turnbon_graph import *", namespace)
    assert set(TOP_LEVEL) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'chat_model'"):
        turnbon_graph.chat_model  # noqa: B018  (the module moved to turnbon_graph.chat)


@pytest.mark.parametrize("package", sorted(SUBPACKAGES))
def test_a_subpackage_exports_its_documented_names(package: str) -> None:
    module = import_module(package)
    assert set(SUBPACKAGES[package]) <= set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_a_documented_module_has_its_names(module_name: str) -> None:
    module = import_module(module_name)
    missing = [name for name in MODULES[module_name] if not hasattr(module, name)]
    assert missing == []


def test_the_top_level_and_subpackage_names_are_the_same_objects() -> None:
    import turnbon_graph.chat
    import turnbon_graph.selectors

    assert turnbon_graph.ChatTurnBoN is turnbon_graph.chat.ChatTurnBoN
    for name in SUBPACKAGES["turnbon_graph.selectors"]:
        assert getattr(turnbon_graph, name) is getattr(turnbon_graph.selectors, name)


def loaded_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules under `prefixes` that a fresh interpreter has loaded once `code` ran."""
    check = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def test_chatturnbon_loads_neither_litellm_nor_the_other_entry_points() -> None:
    # LiteLLM comes with the first call; LangGraph's graph, the middleware and the
    # harness only with the entry points that use them.
    heavy = (
        "litellm",
        "langgraph.graph",
        "langgraph.prebuilt",
        "turnbon_graph.graph",
        "turnbon_graph.middleware",
        "turnbon_graph.bench",
    )
    assert loaded_after("from turnbon_graph import ChatTurnBoN", heavy) == []


def test_turnbon_help_imports_no_langchain_nor_the_chat_model() -> None:
    help_ = (
        "import contextlib, io\n"
        "from turnbon_graph.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])"
    )
    prefixes = ("langchain_core", "langgraph", "litellm", "turnbon_graph.chat")
    assert loaded_after(help_, prefixes) == []
