"""Executes the analysis notebooks and writes their figures as PNG files, for the docs.

    .venv/bin/python scripts/render_notebook_figures.py               # the shipped example run
    .venv/bin/python scripts/render_notebook_figures.py --run RUN --out DIR

Each figure cell of a notebook names its figure in its metadata
(`{"turnbon": {"figure": NAME, "caption": TEXT}}`); the figure it outputs is written to
`OUT/NAME.png` (default `docs/figures/`), and `OUT/README.md` shows them all with their
captions. The notebooks read the run folder `--run` (default: the one they name,
`docs/example-run/`) through `TURNBON_ANALYSIS_RUN`. The notebooks themselves are not
changed (they are committed without outputs).
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DEFAULT_NOTEBOOKS = ("02_paper_figures.ipynb", "03_exploration_exploitation.ipynb")
DEFAULT_OUT = ROOT / "docs" / "figures"
RUN_VARIABLE = "TURNBON_ANALYSIS_RUN"


def figure_cells(notebook: Any) -> list[tuple[str, str, Any]]:
    """(name, caption, cell) of every cell that names its figure, in notebook order."""
    found = []
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("turnbon", {})
        if cell.cell_type == "code" and meta.get("figure"):
            found.append((str(meta["figure"]), str(meta.get("caption", "")), cell))
    return found


def png_of(cell: Any) -> bytes | None:
    """The cell's first PNG output, None if it drew none."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/png" in data:
            return base64.b64decode(data["image/png"])
    return None


def execute(path: Path, run: Path | None, timeout: int = 600) -> Any:
    """The notebook at `path`, executed in its own folder (raises on a failing cell)."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    previous = os.environ.get(RUN_VARIABLE)
    if run is not None:
        os.environ[RUN_VARIABLE] = str(run.resolve())
    try:
        nbclient.NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    finally:
        if run is not None:
            if previous is None:
                del os.environ[RUN_VARIABLE]
            else:
                os.environ[RUN_VARIABLE] = previous
    return notebook


def render(notebooks: list[Path], out: Path, run: Path | None) -> list[Path]:
    """Executes `notebooks`, writes their figures and the index into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    command = "python scripts/render_notebook_figures.py" + (f" --run {run}" if run else "")
    source = (
        f"the run folder `{run.name}`"
        if run is not None
        else "the shipped example run, `docs/example-run` (recorded, seeded, by "
        "`python scripts/record_example_run.py`)"
    )
    index = [
        "# Figures of the analysis notebooks",
        "",
        f"Written by `{command}`: the notebooks executed on {source}; do not edit by hand. "
        "The notebooks (in `notebooks/`; `make lab` opens them, `make notebooks` runs them "
        "headless) explain each one.",
        "",
    ]
    for path in notebooks:
        notebook = execute(path, run)
        index += [f"## `{path.name}`", ""]
        for name, caption, cell in figure_cells(notebook):
            png = png_of(cell)
            if png is None:
                index += [f"*{caption}*: not drawn for this run (nothing to show).", ""]
                continue
            target = out / f"{name}.png"
            target.write_bytes(png)
            written.append(target)
            index += [f"### {caption}", "", f"![{caption}]({target.name})", ""]
    (out / "README.md").write_text("\n".join(index), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="run folder (default: docs/example-run)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the PNGs go")
    parser.add_argument(
        "notebooks", nargs="*", default=list(DEFAULT_NOTEBOOKS), help="notebook file names"
    )
    args = parser.parse_args(argv)
    if args.run is not None and not args.run.is_dir():
        parser.error(f"--run {args.run} is not a folder")
    paths = [NOTEBOOKS / name for name in args.notebooks]
    for path in paths:
        if not path.is_file():
            parser.error(f"no notebook {path}")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for target in render(paths, args.out, args.run):
        print(target.relative_to(ROOT) if target.is_relative_to(ROOT) else target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
