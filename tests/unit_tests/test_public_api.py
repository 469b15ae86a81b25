"""The public import paths, held still: a module moving inside the package must not move
a name users import. Names are listed by the path users import them from (the package,
a documented subpackage or module), never by the module that defines them, so the
package's insides can move freely; a path that moved keeps working, with a
`DeprecationWarning`, for one minor version."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from importlib import import_module

import pytest

import turnbon_graph
from turnbon_graph._exports import MOVED

TOP_LEVEL = sorted(
    {
        "AdaptiveN",
        "AllCandidatesFailedError",
        "Budget",
        "CallResult",
        "Candidate",
        "CandidateRecord",
        "ChatTurnBoN",
        "CompletionClient",
        "ConfigurationError",
        "CredentialsError",
        "EarlyCommit",
        "JSONLTraceSink",
        "LiteLLMClient",
        "ModelSpec",
        "TraceSink",
        "TurnBoNError",
        "TurnBoNMiddleware",
        "TurnBoNState",
        "TurnConfig",
        "TurnEngine",
        "TurnOptions",
        "TurnRecord",
        "Usage",
        "UsageSplit",
        "canonical_action",
        "create_turnbon_agent",
        "create_turnbon_graph",
        "turn_record",
    }
)
"""Every name of `turnbon_graph.__all__`."""

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
    "turnbon_graph.turn": ["TurnEngine", "turn_record", "GeneratedTurn", "ModelSpec"],
}
"""Each subpackage's names as the README and docs import them."""

MODULES = {
    "turnbon_graph.bench.running.runner": ["BenchConfig", "run_benchmark"],
    "turnbon_graph.bench.running.ray_runner": ["RayOptions", "RegisteredEnvironment"],
    "turnbon_graph.bench.environment": ["Environment", "Episode", "TaskSpec", "Verdict"],
    "turnbon_graph.bench.stats.metrics": ["consistency_curve", "cost_table", "pass_at_k"],
    "turnbon_graph.bench.running.runs": ["read_episodes"],
    "turnbon_graph.bench.stats.pairs": ["all_pairs"],
    "turnbon_graph.bench.strategies.registry": [
        "StrategyKind",
        "register_strategy",
        "register_value",
    ],
    "turnbon_graph.bench.strategies.search": ["Search", "Strategy"],
    "turnbon_graph.bench.strategies.spec": ["StrategySpec"],
    "turnbon_graph.bench.strategies.trajectory": ["Trajectory"],
    "turnbon_graph.bench.values.value": ["ValueFunction", "ValueModel"],
    "turnbon_graph.bench.values.valuing": ["ValueSetup"],
    "turnbon_graph.bench.values.prm": ["ProcessRewardModel"],
    "turnbon_graph.config": ["TurnConfig", "TurnOptions", "turn_config"],
    "turnbon_graph.litellm_provider": ["TurnBoNProvider", "register", "turnbon_record"],
    "turnbon_graph.langgraph_server": ["make_graph"],
}
"""Modules the README, docs/ray.md, docs/strategies.md and the integrations' READMEs
import names from."""

OLD_PATHS = {
    "turnbon_graph.client": ["LiteLLMClient", "load_litellm", "redact", "describe_error"],
    "turnbon_graph.generate": ["CandidateGenerator", "ModelSpec", "to_openai_messages"],
    "turnbon_graph.candidates": ["Candidate", "canonical_action"],
    "turnbon_graph.sampling": ["AdaptiveN", "Budget", "EarlyCommit"],
    "turnbon_graph.turn_state": ["GeneratedTurn"],
    "turnbon_graph.openai_format": ["FORWARDED", "parse_chat_request", "parse_messages"],
    "turnbon_graph.openai_responses": ["parse_responses_request"],
    "turnbon_graph.litellm_calls": ["supports_native_n", "quiet_call"],
    "turnbon_graph.chat_client": ["ChatModelClient", "chat_model_label", "usage_of_message"],
    "turnbon_graph.prompted_tools": ["prompted_request"],
    "turnbon_graph.server_graph": ["make_graph"],
    "turnbon_graph.sync": ["run_sync"],
    "turnbon_graph.extras": ["install_hint"],
    "turnbon_graph.strategies": ["spec", "beam"],
    "turnbon_graph.strategies.beam": ["Beam"],
}
"""Module paths of the previous minor version, with names users may have imported."""


def test_the_package_exports_exactly_the_listed_names() -> None:
    assert sorted(turnbon_graph.__all__) == TOP_LEVEL
    assert dir(turnbon_graph) == TOP_LEVEL


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_a_public_name_imports_from_the_package(name: str) -> None:
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a public path never warns
        exec(f"from turnbon_graph import {name}", namespace)
    assert namespace[name] is getattr(turnbon_graph, name)


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
    import turnbon_graph.turn

    assert turnbon_graph.ChatTurnBoN is turnbon_graph.chat.ChatTurnBoN
    for name in SUBPACKAGES["turnbon_graph.turn"]:
        assert getattr(turnbon_graph.turn, name) is getattr(turnbon_graph, name, None) or (
            name not in TOP_LEVEL
        )


@pytest.mark.parametrize("name", SUBPACKAGES["turnbon_graph.selectors"])
def test_a_selector_at_the_package_root_still_works_with_a_warning(name: str) -> None:
    import turnbon_graph.selectors

    with pytest.warns(DeprecationWarning, match=f"import {name} from turnbon_graph.selectors"):
        value = turnbon_graph.__getattr__(name)
    assert value is getattr(turnbon_graph.selectors, name)
    assert name not in turnbon_graph.__all__


BENCH_ROOMS = {old for old in MOVED if old.startswith("turnbon_graph.bench.")}
"""The harness's modules that moved into its rooms (running, report, stats, readers,
values, metering); checked together below, in one interpreter."""


def test_every_moved_path_is_listed_with_its_old_names() -> None:
    assert set(OLD_PATHS) - {"turnbon_graph.strategies.beam"} == set(MOVED) - BENCH_ROOMS


def test_every_old_bench_path_is_its_new_module_with_a_warning() -> None:
    code = (
        "import importlib, json, warnings\n"
        "from turnbon_graph._exports import MOVED\n"
        "found = {}\n"
        f"for old in {sorted(BENCH_ROOMS)!r}:\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module(old)\n"
        "    said = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "    found[old] = [module is importlib.import_module(MOVED[old][0]), said]\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    assert len(found) == len(BENCH_ROOMS) == 26
    for old, (same, said) in found.items():
        assert same, old
        assert any(f"{old} has moved to {MOVED[old][0]}" in w for w in said), (old, said)


def test_the_harness_names_are_at_the_bench_package() -> None:
    import turnbon_graph.bench
    from turnbon_graph.bench.running.ray_runner import RayOptions, RegisteredEnvironment
    from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
    from turnbon_graph.bench.running.runs import EpisodeResult

    expected = (BenchConfig, EpisodeResult, RayOptions, RegisteredEnvironment, run_benchmark)
    assert tuple(getattr(turnbon_graph.bench, n) for n in turnbon_graph.bench.__all__) == expected


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_module_path_still_works_with_a_warning(old: str) -> None:
    # In a fresh interpreter: the warning comes once per process, at the import.
    names = ", ".join(OLD_PATHS[old])
    code = (
        "import warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        f"    from {old} import {names}\n"
        "except DeprecationWarning as w:\n"
        "    print('WARNED', w)\n"
        "warnings.simplefilter('ignore')\n"
        f"from {old} import {names}\n"
        "import sys\n"
        f"print('SAME', sys.modules[{old!r}].__spec__.name != {old!r} or "
        f"type(sys.modules[{old!r}]).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    warned = out.stdout.split()[1]  # the old path, or the moved package it is under
    assert out.stdout.startswith("WARNED") and old.startswith(warned), out.stdout
    assert "has moved to" in out.stdout
    assert "SAME True" in out.stdout or "SAME _MovedModule" in out.stdout


def test_a_moved_package_gives_its_submodules_once() -> None:
    # turnbon_graph.strategies.beam is the very module bench.strategies.beam, not a copy
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import turnbon_graph.strategies.beam as old\n"
        "import turnbon_graph.bench.strategies.beam as new\n"
        "print(old is new, old.__spec__.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "turnbon_graph.bench.strategies.beam"]


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
