"""The analysis notebooks run top to bottom on the example run the repository ships
(docs/example-run/), drawing every figure they name and the paper's tables, with the
numbers the library computes for that run."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.integration_tests.test_notebooks import NOTEBOOKS, execute, outputs
from turnbon_graph.analysis.behaviours import TAGS
from turnbon_graph.analysis.figures import rollout_summaries
from turnbon_graph.analysis.judge import VERDICTS_FILE, read_verdicts
from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, read_reports
from turnbon_graph.bench import report
from turnbon_graph.bench.running.runs import read_episodes

EXAMPLE_RUN = NOTEBOOKS.parent / "docs" / "example-run"
RUN_VARIABLE = "TURNBON_ANALYSIS_RUN"  # the notebooks' override; unset, they read EXAMPLE_RUN

PAPER_FIGURES = {
    "fig2a_pass_rate",
    "fig2b_pass_at_k",
    "fig3a_turns_to_solve",
    "fig3b_consistency",
    "table1_token_cost",
    "fig4_preference",
    "fig5_lengths",
    "table3_flagged",
}
ROLLOUT_FIGURES = {"oracle_realised", "headroom", "h_vs_rho"}


def run_on_example(name: str) -> Any:
    assert EXAMPLE_RUN.is_dir(), f"the example run {EXAMPLE_RUN} is missing"
    saved = os.environ.pop(RUN_VARIABLE, None)
    try:
        return execute(name, "stub")
    finally:
        if saved is not None:
            os.environ[RUN_VARIABLE] = saved


@pytest.fixture(scope="module")
def paper() -> Iterator[Any]:
    yield run_on_example("02_paper_figures.ipynb")


@pytest.fixture(scope="module")
def exploration() -> Iterator[Any]:
    yield run_on_example("03_exploration_exploitation.ipynb")


def figures(notebook: Any) -> dict[str, list[dict[str, Any]]]:
    """The outputs of each cell that names its figure (cell metadata turnbon.figure)."""
    return {
        cell.metadata["turnbon"]["figure"]: cell.outputs
        for cell in notebook.cells
        if cell.cell_type == "code" and "figure" in cell.metadata.get("turnbon", {})
    }


def has_png(cell_outputs: list[dict[str, Any]]) -> bool:
    return any("image/png" in o.get("data", {}) for o in cell_outputs)


def text(notebook: Any) -> str:
    """Everything the notebook printed or showed as text (tables as pandas renders them)."""
    parts = []
    for output in outputs(notebook):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif "text/plain" in output.get("data", {}):
            parts.append(output["data"]["text/plain"])
    return "\n".join(parts)


def test_the_example_run_has_what_the_notebooks_read() -> None:
    assert read_episodes(EXAMPLE_RUN)
    assert read_verdicts(EXAMPLE_RUN), f"no {VERDICTS_FILE}: Table 3 would not be drawn"
    assert read_reports(EXAMPLE_RUN), f"no {ROLLOUTS_FILE}: notebook 03 has nothing to show"


def test_paper_figures_draws_figures_2_to_5_and_table_3(paper: Any) -> None:
    drawn = figures(paper)
    assert set(drawn) == PAPER_FIGURES
    missing = sorted(name for name, cell_outputs in drawn.items() if not has_png(cell_outputs))
    assert not missing, f"figure cells without a PNG: {missing}"


def test_paper_figures_shows_tables_1_to_3_with_the_runs_numbers(paper: Any) -> None:
    shown = text(paper)
    results = read_episodes(EXAMPLE_RUN)
    order = report.setting_order(results, report.read_settings(EXAMPLE_RUN))
    assert report.one_line_summary(results, order) in shown  # the run it read
    assert "pass@1" in shown and "all 1 solved" in shown  # Figures 2 and 3 as tables
    assert "generator_tokens" in shown and "total_vs_baseline" in shown  # Table 1
    assert "wrong_submission" in shown and "out_of_context" in shown  # Table 2
    assert all(tag in shown for tag in TAGS)  # Figure 4's table: every behaviour
    assert "command_chars" in shown and "vs_unpicked_p_value" in shown  # Figure 5's table
    verdicts = read_verdicts(EXAMPLE_RUN)
    assert f"{len(verdicts)} verdicts by" in shown  # Table 3
    assert "Base (N=1)" in shown and "Δ N=4" in shown and "Looping" in shown


def test_exploration_notebook_draws_oracle_realised_and_headroom(exploration: Any) -> None:
    drawn = figures(exploration)
    assert set(drawn) == ROLLOUT_FIGURES
    missing = sorted(name for name, cell_outputs in drawn.items() if not has_png(cell_outputs))
    assert not missing, f"figure cells without a PNG: {missing}"


def test_exploration_notebook_summarises_every_selector(exploration: Any) -> None:
    shown = text(exploration)
    summaries = rollout_summaries(read_reports(EXAMPLE_RUN))
    assert len(summaries) >= 2  # oracle vs realised compares selectors
    for label, summary in summaries.items():
        assert label in shown
        assert summary.mean_oracle is not None and f"{summary.mean_oracle:.3f}" in shown
        if summary.mean_h is not None:
            assert f"{summary.mean_h:.3f}" in shown
    assert "mean_realised" in shown and "mean_mu" in shown and "rho_v" in shown


def render_script() -> ModuleType:
    path = NOTEBOOKS.parent / "scripts" / "render_notebook_figures.py"
    spec = importlib.util.spec_from_file_location("render_notebook_figures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_script_finds_every_figure_and_its_png(paper: Any, exploration: Any) -> None:
    """scripts/render_notebook_figures.py names the PNGs in docs/figures by these cells."""
    script = render_script()
    for notebook, expected in ((paper, PAPER_FIGURES), (exploration, ROLLOUT_FIGURES)):
        found = script.figure_cells(notebook)
        assert {name for name, _, _ in found} == expected
        assert all(caption for _, caption, _ in found)
        assert all(script.png_of(cell).startswith(b"\x89PNG") for _, _, cell in found)
