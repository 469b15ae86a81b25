"""Cost estimates kept in the run folder and frozen from a pilot
(`turnbon_graph.bench.metering.stored`), and a run's plan starting from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnbon_graph.bench.metering.budget import Estimates
from turnbon_graph.bench.metering.stored import (
    ESTIMATES_FILE,
    dump_estimates,
    frozen_for,
    read_estimates,
    write_estimates,
)
from turnbon_graph.bench.running.plan import BenchConfig, plan_run
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage
from turnbon_terminal import TerminalEnvironment

LEARNED = Estimates(first_ratio=0.3, ratios={"generator": [0.25]}, completions={"value": [7.0]})


def test_the_file_holds_what_was_learned(tmp_path: Path) -> None:
    path = tmp_path / ESTIMATES_FILE
    write_estimates(path, dump_estimates({"beam W=2 N=3": LEARNED}))
    assert read_estimates(path) == {"beam W=2 N=3": LEARNED}
    assert not list(tmp_path.glob(".*partial"))  # written whole, then renamed


def test_frozen_estimates_learn_nothing() -> None:
    (frozen,) = frozen_for({"beam": LEARNED}, {"beam": ["beam"]}).values()
    assert frozen.frozen and frozen.ratios == LEARNED.ratios and frozen is not LEARNED
    frozen.learn("generator", Usage(prompt_tokens=900, completion_tokens=50), 1000, 1)
    frozen.grew(500)
    assert frozen.ratio("generator") == 0.25 and frozen.completion("generator") == 0.0
    assert frozen.steps == [] and LEARNED.frozen is False


def test_a_setting_is_found_under_a_label_of_its_budget_or_not_and_else_refused() -> None:
    pilot = {"beam W=2 N=3 budget=40": LEARNED}
    found = frozen_for(pilot, {"beam W=2 N=3": ["beam W=2 N=3", "beam W=2 N=3 budget=40"]})
    assert list(found) == ["beam W=2 N=3"] and found["beam W=2 N=3"].frozen
    with pytest.raises(ConfigurationError, match=r"no estimates for 'particle W=3 N=1'.*has"):
        frozen_for(pilot, {"particle W=3 N=1": ["particle W=3 N=1"]})


def test_a_file_that_is_no_estimates_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        read_estimates(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text('{"beam": {"ratios": 3}}')
    with pytest.raises(ConfigurationError, match="is not a cost estimates file"):
        read_estimates(tmp_path / "bad.json")


def config(**kwargs: object) -> BenchConfig:
    beam = StrategySpec(name="beam", width=2, token_budget=40, budget_unit="completion")
    return BenchConfig(model="openai/stub", n_values=[3], strategy=beam, **kwargs)  # type: ignore[arg-type]


def test_a_resumed_run_plans_on_what_its_folder_learned(tmp_path: Path) -> None:
    run = tmp_path / "run"
    plan_run(TerminalEnvironment(), config(), run, ["largest-file"])
    write_estimates(run / ESTIMATES_FILE, dump_estimates({"beam W=2 N=3": LEARNED}))
    resumed = config()
    plan_run(TerminalEnvironment(), resumed, run, ["largest-file"])
    assert resumed.estimates == {"beam W=2 N=3": LEARNED}


def test_a_pilot_is_frozen_into_a_new_run_and_refused_for_one_that_learned(
    tmp_path: Path,
) -> None:
    pilot = tmp_path / "pilot.json"
    write_estimates(pilot, dump_estimates({"beam W=2 N=3 budget=40": LEARNED}))
    fresh = config(estimates_file=pilot)
    plan_run(TerminalEnvironment(), fresh, tmp_path / "new", ["largest-file"])
    assert fresh.estimates["beam W=2 N=3"].frozen
    assert read_estimates(tmp_path / "new" / ESTIMATES_FILE) == fresh.estimates
    learned = tmp_path / "learned"
    plan_run(TerminalEnvironment(), config(), learned, ["largest-file"])
    write_estimates(learned / ESTIMATES_FILE, dump_estimates({"beam W=2 N=3": LEARNED}))
    with pytest.raises(ConfigurationError, match="learned its own cost estimates"):
        plan_run(TerminalEnvironment(), config(estimates_file=pilot), learned, ["largest-file"])
