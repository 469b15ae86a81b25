from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import turnbon_graph
from turnbon_graph._extras import install_hint

ROOT = Path(__file__).resolve().parents[2]


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


class _PriceMapHost(http.server.BaseHTTPRequestHandler):
    """Stands in for the host LiteLLM fetches its price map from: counts the requests."""

    fetches = 0

    def do_GET(self) -> None:
        type(self).fetches += 1
        self.send_error(404)  # not retried: LiteLLM keeps its bundled map

    def log_message(self, *_: Any) -> None:
        pass


def _fetches_at_import(code: str, price_map_url: str) -> subprocess.CompletedProcess[str]:
    # No LiteLLM setting and no proxy from the test's environment (conftest.py sets the
    # variable under test); the price map's URL is the loopback stand-in.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LITELLM_") and "proxy" not in k.lower()
    }
    env["LITELLM_MODEL_COST_MAP_URL"] = price_map_url
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


def test_importing_the_package_before_litellm_keeps_litellm_from_fetching_its_price_map() -> None:
    """`import turnbon_graph; import litellm`: LiteLLM reads its bundled price map and
    opens no connection to fetch one; LiteLLM imported alone does fetch (so the stand-in
    host would have seen it)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PriceMapHost)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/model_prices.json"
    try:
        alone = _fetches_at_import("import litellm", url)
        assert alone.returncode == 0, alone.stderr[-2000:]
        assert _PriceMapHost.fetches >= 1, "LiteLLM alone fetched nothing: the probe sees nothing"
        _PriceMapHost.fetches = 0
        code = (
            "import os, turnbon_graph; print(os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP')); "
            "import litellm"
        )
        first = _fetches_at_import(code, url)
    finally:
        server.shutdown()
        server.server_close()
    assert first.returncode == 0, first.stderr[-2000:]
    assert _PriceMapHost.fetches == 0
    assert "model cost map" not in first.stderr
    assert first.stdout.strip() == "True"


def _project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        project: dict[str, Any] = tomllib.load(file)["project"]
    return project


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name for r in requirements}


def _extras_of(extras: dict[str, list[str]], name: str) -> set[str]:
    """The extras `name` brings, itself included, through `turnbon-graph[...]` entries."""
    found, todo = set(), [name]
    while todo:
        extra = todo.pop()
        if extra in found:
            continue
        found.add(extra)
        for text in extras[extra]:
            requirement = Requirement(text)
            if requirement.name == "turnbon-graph":
                todo += sorted(requirement.extras)
    return found


def test_the_runtime_dependencies_carry_nothing_only_tests_use() -> None:
    project = _project()
    extras = project["optional-dependencies"]
    core = _names(project["dependencies"])
    user_facing = set().union(*(_names(extras[name]) for name in _extras_of(extras, "all")))
    test_only = _names(extras["test"]) - user_facing
    assert core & test_only == set()
    assert "pytest" not in core  # the terminal extra's (the verifier's), and the tests'


def test_the_terminal_verifier_comes_with_the_extras_that_run_it() -> None:
    # The terminal verifier runs each task's pytest tests with a copy of pytest; `make
    # demo` installs only the `local` extra, and `turnbon demo` runs a terminal task.
    extras = _project()["optional-dependencies"]
    assert "pytest" in _names(extras["terminal"])
    for name in ("local", "all"):
        assert "terminal" in _extras_of(extras, name), name


def test_all_is_every_user_facing_extra() -> None:
    extras = _project()["optional-dependencies"]
    user_facing = set(extras) - {"all", "test", "docs"}
    assert _extras_of(extras, "all") == user_facing | {"all"}
    for name, requirements in extras.items():
        for text in requirements:  # a self-reference names extras that exist
            requirement = Requirement(text)
            if requirement.name == "turnbon-graph":
                assert requirement.extras <= set(extras), (name, text)


def test_the_changelog_names_the_version() -> None:
    # pyproject.toml declares the version; __version__ and the wheel read it from there.
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    released = re.findall(r"^## \[(\d+\.\d+\.\d+[^\]]*)\]", text, flags=re.MULTILINE)
    assert released, "no version heading (## [X.Y.Z] - date) in CHANGELOG.md"
    assert released[0] == _project()["version"] == turnbon_graph.__version__
    assert "Semantic Versioning" in text and "DeprecationWarning" in text


def test_install_hints_name_no_index() -> None:
    # No package index has turnbon-graph: messages say how to install from a clone or
    # a wheel (turnbon_graph._extras), never `pip install 'turnbon-graph[...]'`.
    hint = install_hint("serve")
    assert "pip install -e '.[serve]'" in hint
    wheel = f"turnbon_graph-{turnbon_graph.__version__}-py3-none-any.whl"
    assert f"pip install '{wheel}[serve]'" in hint
    assert "'turnbon-graph[" not in hint
    sources = (ROOT / "turnbon_graph").rglob("*.py")
    quoting = [p for p in sources if p.name != "_extras.py" and "'turnbon-graph[" in p.read_text()]
    assert quoting == []  # every message words it through install_hint
    assert install_hint("local", then="pip install --no-deps x").endswith(
        "; then pip install --no-deps x"
    )
    assert install_hint("plots", markdown=True).startswith("`pip install -e '.[plots]'`")
    with pytest.raises(ValueError):
        install_hint()
    offenders = {
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("turnbon_graph", "integrations")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "_extras.py" and "tasks" not in path.relative_to(ROOT).parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "turnbon-graph[" in line
    }
    # Not yet moved to install_hint, by their owners (then drop them from here).
    pending = ("turnbon_graph/cli/serve/", "turnbon_graph/bench/running/ray_runner.py:")
    assert sorted(o for o in offenders if not o.startswith(pending)) == []


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


def test_a_missing_pytest_names_the_terminal_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from turnbon_graph.errors import TurnBoNError
    from turnbon_terminal.verdict import pytest_site

    real = metadata.distribution

    def without_pytest(name: str) -> metadata.Distribution:
        if name == "pytest":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(pytest_site.metadata, "distribution", without_pytest)
    with pytest.raises(pytest_site.PytestMissingError) as raised:
        pytest_site.pytest_site(Path("/nonexistent"))
    assert isinstance(raised.value, TurnBoNError | ImportError)
    assert f"install the terminal extra: {install_hint('terminal')}" in str(raised.value)
