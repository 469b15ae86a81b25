"""One `turnbon bench` command sweeps widths, particle temperatures and budgets: each
combination a setting of the run, labelled apart."""

from __future__ import annotations

from turnbon_graph.bench.running.runs import settings_of
from turnbon_graph.cli.bench import strategy_of
from turnbon_graph.cli.main import build_parser


def specs_of(*flags: str) -> list[str]:
    args = build_parser().parse_args(["bench", "--env", "terminal", "--model", "m", *flags])
    specs, _ = strategy_of(args, {})
    return [s.label for s in settings_of(specs, args.n, strict=True)]


def test_widths_temperatures_and_budgets_make_a_setting_each() -> None:
    labels = specs_of(
        "--strategy", "bon", "beam", "particle", "-n", "3", "--width", "2", "4",
        "--value-temperature", "0.5", "1", "--token-budget", "300", "2000",
    )  # fmt: skip
    # bon: 2 budgets; beam: 2 widths x 2 budgets; particle: 2 widths x 2 temperatures x
    # 2 budgets (a temperature is particle's alone: beam and bon do not multiply by it).
    assert len(labels) == 2 + 4 + 8 == len(set(labels))
    assert "particle W=4 T=0.5 N=1 budget=300" in labels
    assert "particle W=4 N=1 budget=300" in labels  # T=1, the default, unlabelled
    assert "beam W=4 N=3 budget=2000" in labels and "N=3 budget=300" in labels


def test_one_width_and_the_default_temperature_label_as_before() -> None:
    assert specs_of("--strategy", "particle", "--width", "3") == ["particle W=3 N=1"]
