from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import turnbon_graph


def test_every_public_name_resolves() -> None:
    for name in turnbon_graph.__all__:
        assert getattr(turnbon_graph, name) is not None, name
    assert sorted(turnbon_graph.__all__) == sorted(set(turnbon_graph.__all__))


def test_importing_the_package_and_cli_loads_neither_litellm_nor_langgraph() -> None:
    code = (
        "import sys, turnbon_graph, turnbon_graph.cli; "
        "print(sorted(m for m in ('litellm', 'langgraph') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_using_the_library_does_not_import_litellm_until_a_call() -> None:
    code = (
        "import sys; from turnbon_graph import create_turnbon_graph; "
        "create_turnbon_graph('openai/x', n=2); print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_terminal_verifier_needs_no_extra() -> None:
    # `make demo` installs only the `local` extra, and the demo's verdict comes from the
    # task's pytest tests: pytest must come with the package itself.
    from importlib.metadata import requires

    core = [r for r in requires("turnbon-graph") or [] if "extra ==" not in r]
    assert any(r.startswith("pytest") for r in core), core


def test_the_repository_stands_alone() -> None:
    # Papers are cited by title (docs/references.md), never by a path outside the repo.
    root = Path(__file__).resolve().parents[2]
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    outside = ("shared/seeds", "seeds/000_", "seeds/004_", "DESIGN.md")
    offenders = [
        name
        for name in tracked
        if name.endswith((".py", ".md", ".ipynb", ".toml", ".yaml"))
        and any(ref in (root / name).read_text(errors="replace") for ref in outside)
        and name != "tests/unit_tests/test_package.py"
    ]
    assert offenders == []
    assert (root / "docs" / "references.md").is_file()
