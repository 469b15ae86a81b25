"""docs/stub-report reproduces: the seeded commands written at its top, run again, give
its numbers exactly; and the docs quote the numbers it has."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "stub-report" / "report.md"
RUN_VARYING = ("| Run folder |", "| Started |")
"""Summary rows that name where and when the run was made, not what it measured."""


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "record_example_run", ROOT / "scripts" / "record_example_run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measured(text: str) -> list[str]:
    """The report's lines, less those that say where and when."""
    return [line for line in text.splitlines() if not line.startswith(RUN_VARYING)]


def test_the_stub_report_names_the_commands_that_made_it() -> None:
    text = DOC.read_text(encoding="utf-8")
    top = text.split("\n# ", 1)[0]
    for command in script().stub_report_commands():
        assert f"`turnbon {shlex.join(command)}`" in top
        assert "--seed" in command or command[0] == "report"


def test_rerunning_its_seeded_commands_gives_its_numbers(tmp_path: Path) -> None:
    recorder = script()
    run = tmp_path / Path(recorder.STUB_REPORT_RUN).name  # the same name, for the title
    fresh = recorder.record_stub_report(tmp_path / "report", run)
    assert measured(fresh.read_text(encoding="utf-8")) == measured(DOC.read_text("utf-8"))


def test_the_readme_quotes_the_stub_reports_pass_rates() -> None:
    """The docs page on benchmarks quotes the report's pass rates, as they are."""
    rates = dict(re.findall(r"^\| (N=\d+) \| \d+ \| \d+ \| ([\d.]+%) \|", DOC.read_text(), re.M))
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    quoted = re.search(r"\(N=1 ([\d.]+%) vs N=4 ([\d.]+%) mean\s+pass\s+rate", page)
    assert quoted is not None
    assert (rates["N=1"], rates["N=4"]) == quoted.groups()
