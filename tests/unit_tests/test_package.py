from __future__ import annotations

import subprocess
import sys

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
