"""The registry of strategies and value functions: a new strategy is one class, named by
its `kind`, offered by `turnbon bench --strategy` and labelled in the run folder from
it; a value function is named in a spec's `value`; the process reward model's request
and how its score is read; a value function's answer outside 0 to 10 is unusable."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from tests.counter_env import CounterEpisode
from turnbon_graph.bench.environment import Episode, TaskSpec
from turnbon_graph.bench.metering.budget import Ledger
from turnbon_graph.bench.running.runs import settings_of
from turnbon_graph.bench.strategies.beam import Beam
from turnbon_graph.bench.strategies.registry import (
    StrategyKind,
    register_strategy,
    register_value,
    strategy_class,
    strategy_kind,
    strategy_names,
    value_scheme,
)
from turnbon_graph.bench.strategies.search import Search, Strategy
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.values.prm import prm_request, read_score
from turnbon_graph.bench.values.value import checked_score
from turnbon_graph.bench.values.valuing import make_value
from turnbon_graph.cli.main import build_parser
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage
from turnbon_graph.selectors.model_call import Asked
from turnbon_graph.turn.engine import TurnEngine


class Widest(Strategy):
    """A strategy of a test module: beam search under a name and a width of its own."""

    kind = StrategyKind(name="widest", summary="beam at width 4", width=4, value=True)


register_strategy(Widest)


def strategy_choices() -> list[str]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bench = commands.choices["bench"]
    (flag,) = (a for a in bench._actions if a.dest == "strategy")
    return list(flag.choices or [])


def test_the_built_in_strategies_and_fusion_and_refine_are_named() -> None:
    assert strategy_names()[:7] == [
        "bon",
        "beam",
        "particle",
        "lookahead",
        "escalate",
        "fusion",
        "refine",
    ]
    for name in strategy_names()[:7]:
        assert strategy_class(name).kind == strategy_kind(name)


def test_a_registered_strategy_is_offered_labelled_and_defaulted_from_its_kind() -> None:
    assert "widest" in strategy_names() and "widest" in strategy_choices()
    assert strategy_class("widest") is Widest
    spec = StrategySpec(name="widest")
    assert spec.width == 4 and spec.searches and spec.label(3) == "widest W=4 N=3"
    assert [s.label for s in settings_of([spec, StrategySpec()], [1, 2])] == [
        "widest W=4 N=1",
        "widest W=4 N=2",
        "N=1",
        "N=2",
    ]
    with pytest.raises(ValueError, match="--horizon applies to lookahead, not widest"):
        StrategySpec(name="widest", horizon=2)


def test_the_command_line_lists_only_the_built_in_strategies_when_nothing_registers() -> None:
    """A fresh process: `turnbon bench --help` lists what ships, and loads no strategy."""
    code = (
        "import sys; from turnbon_graph.cli.main import build_parser; build_parser(); "
        "from turnbon_graph.bench.strategies.registry import strategy_names; "
        "print(strategy_names()); "
        "print(any(m.endswith(('.search', '.beam')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, loaded = out.stdout.splitlines()
    assert names == str(["bon", "beam", "particle", "lookahead", "escalate", "fusion", "refine"])
    assert loaded == "False"


@pytest.mark.parametrize(
    ("cls", "said"),
    [
        (type("NoKind", (Strategy,), {"kind": None}), "needs a `kind"),
        (type("Inherited", (Strategy,), {}), "needs a `kind"),
        (type("Upper", (Strategy,), {"kind": StrategyKind("Beam2")}), "lower-case letters"),
        (type("Taken", (Strategy,), {"kind": StrategyKind("beam")}), "exists already"),
    ],
    ids=["no kind", "a built-in's kind", "a bad name", "a taken name"],
)
def test_a_strategy_that_cannot_be_registered_says_why(cls: type, said: str) -> None:
    with pytest.raises(ConfigurationError, match=said):
        register_strategy(cls)


def test_registering_the_same_class_again_replaces_it() -> None:
    again = type("Widest", (Strategy,), {"kind": Widest.kind, "__module__": __name__})
    register_strategy(again)
    try:
        assert strategy_class("widest") is again
    finally:
        register_strategy(Widest)


def test_an_unknown_strategy_is_a_clear_error_but_reads_back() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown strategy 'nowhere' .*register"):
        strategy_kind("nowhere")
    # A run folder of a strategy registered in another process still loads and labels.
    spec = StrategySpec.model_validate({"name": "nowhere", "width": 3})
    assert spec.searches and spec.label(2) == "nowhere W=3 N=2"


def test_two_settings_of_one_label_are_refused_when_a_run_is_made() -> None:
    rubrics = [StrategySpec(name="beam", rubric="a"), StrategySpec(name="beam", rubric="b")]
    with pytest.raises(ConfigurationError, match="both labelled 'beam W=2 N=2'"):
        settings_of(rubrics, [2], strict=True)
    assert len(settings_of(rubrics, [2])) == 1  # read back as it was


def test_value_functions_are_named_by_scheme() -> None:
    assert value_scheme(None) is None
    assert value_scheme("openai/gpt-4o-mini") is None
    assert value_scheme("ollama/qwen:7b") is None
    assert value_scheme("oracle") == ("oracle", None)
    assert value_scheme("prm:openai/my-prm") == ("prm", "openai/my-prm")
    register_value("lengthy-unit", lambda setup: None)
    assert value_scheme("lengthy-unit:3") == ("lengthy-unit", "3")
    oracle = StrategySpec(name="beam", value="oracle")
    assert oracle.oracle and oracle.label(2) == "beam W=2 N=2 value=oracle"
    assert StrategySpec(name="beam", value="openai/x").label(2) == "beam W=2 N=2"
    with pytest.raises(ConfigurationError, match="built-in value function"):
        register_value("oracle", lambda setup: None)
    with pytest.raises(ValueError, match="--value-rubric is the LLM rubric's"):
        StrategySpec(name="beam", value="oracle", rubric="be kind")
    with pytest.raises(ValueError, match="--value-rubric applies to beam, particle, lookahead"):
        StrategySpec(name="escalate", rubric="be kind")


def test_fusion_and_refine_are_bon_with_their_selector() -> None:
    for name in ("fusion", "refine"):
        spec = StrategySpec(name=name)
        assert not spec.searches and spec.label(3) == f"{name} N=3"
        assert spec.model_copy(update={"token_budget": 500}).searches
        with pytest.raises(ValueError, match="--width applies to beam, particle"):
            StrategySpec(name=name, width=2)


def test_the_reward_models_request_is_the_task_and_the_steps() -> None:
    messages = [
        SystemMessage("You are an agent."),
        HumanMessage("Find the largest file."),
        AIMessage("", tool_calls=[{"name": "shell", "args": {"command": "ls -S"}, "id": "a"}]),
        ToolMessage("big.bin\nsmall.txt", tool_call_id="a"),
        AIMessage("It is big.bin."),
        HumanMessage("And the smallest?"),
        AIMessage("small.txt"),
    ]
    assert prm_request(messages) == [
        {"role": "user", "content": "Find the largest file."},
        {
            "role": "assistant",
            "content": 'shell({"command": "ls -S"})\n-> big.bin\nsmall.txt\n\nIt is big.bin.',
        },
        {"role": "user", "content": "And the smallest?"},
        {"role": "assistant", "content": "small.txt"},
    ]
    assert prm_request(messages[:3], separator="<step>")[1]["content"] == (
        'shell({"command": "ls -S"})'
    )


@pytest.mark.parametrize(
    ("text", "scale", "score"),
    [
        ("0.83", (0.0, 1.0), 8.3),
        ("reward: 0.2", (0.0, 1.0), 2.0),
        ('{"score": 1.5e-1}', (0.0, 1.0), 1.5),
        ("reward:-12.5", (-25.0, 0.0), 5.0),
        ("step 3 of 4: 7", (0.0, 10.0), 7.0),
        ("2.0", (0.0, 1.0), 10.0),  # clipped
    ],
)
def test_a_reward_is_the_last_number_on_the_models_scale(
    text: str, scale: tuple[float, float], score: float
) -> None:
    value, problem = read_score(text, *scale)
    assert problem is None and value == pytest.approx(score)


def test_a_reply_without_a_number_is_unusable() -> None:
    assert read_score("I cannot score this.", 0, 1) == (
        None,
        "no number in the reward model's reply",
    )


@pytest.mark.parametrize(
    ("answer", "value", "error"),
    [
        (7, 7.0, None),
        (Asked(3.5, "x", Usage()), 3.5, None),
        (11.0, None, "invalid answer: score 11.0 is not a number from 0 to 10"),
        (-1, None, "invalid answer: score -1 is not a number from 0 to 10"),
        (math.nan, None, "invalid answer: score nan is not a number from 0 to 10"),
        (None, None, "invalid answer: no score"),
        (Asked(None, None, Usage(), "the call failed"), None, "the call failed"),
    ],
)
def test_a_value_functions_answer_is_checked(answer: Any, value: float | None, error: str) -> None:
    checked = checked_score(answer)
    assert (checked.value, checked.error) == (value, error)


class FromTheTranscript:
    """A value function that asks no model: its calls cost the budget nothing."""

    name = "from-the-transcript"

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        return 0

    async def score(self, messages: Sequence[BaseMessage], episode: Episode) -> float:
        return 5.0


def test_a_value_function_that_asks_no_model_is_planned_at_no_cost() -> None:
    """The plan of a turn under a budget counts a value call by its request; the LLM
    rubric's costs tokens, a function of the transcript none (a cost would narrow the
    turn for nothing)."""
    connection = {"api_base": "http://127.0.0.1:9", "api_key": "x"}
    engine = TurnEngine.from_options("openai/stub", n=2, completion_kwargs=connection)
    task = TaskSpec(id="count", instruction="Bring the counter to 3.")
    ledger = Ledger(1000.0)
    ledger.estimates.first_ratio = 0.25
    ledger.estimates.grew(400)
    rubric = make_value(engine, StrategySpec(name="beam"), task, None, ledger)
    costs = {}
    for value in (rubric, FromTheTranscript()):
        search = Search(Beam(2, 2), engine, value, task, CounterEpisode(3), ledger)
        costs[value.name] = search.strategy.scoring_cost(search, search.live[0], 2)
    assert costs["value:openai/stub"] > 0 and costs["from-the-transcript"] == 0
