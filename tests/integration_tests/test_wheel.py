"""The wheel as a user gets it: built from this checkout with `python -m build`, passed by
`twine check`, installed with its [all] extra into a fresh virtualenv outside the
repository, and run from a folder outside it (`turnbon demo --model stub`).

The fresh virtualenv gets the wheel alone (`pip install --no-deps`); its dependencies
come from this test run's own site-packages through a `.pth` line, which adds that
folder to sys.path after the venv's own (so the wheel's turnbon_graph is the one
imported, never the checkout's editable install: a folder added by a `.pth` line has its
own `.pth` files, the editable finder's among them, left unread). That [all] resolves
against what is there is then asked of pip itself: a dry run of `pip install --no-index
'<wheel>[all]'` that must find nothing to install (`make setup-test` installs [all]).
Only the isolated build reaches an index, for its backend (setuptools); no install does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "turnbon_graph",
    "turnbon_local",
    "turnbon_terminal",
    "turnbon_bfcl",
    "turnbon_harbor",
    "turnbon_inspect",
)
TASKS = "integrations/turnbon_terminal/tasks/"

pytestmark = pytest.mark.skipif(
    not (ROOT / ".git").exists() or shutil.which("git") is None,
    reason="builds the wheel from the git checkout's files (git ls-files)",
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    sdist: Path
    venv: Path
    outside: Path
    """An empty folder outside the repository: the cwd of every command."""

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            cwd=self.outside,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _run(*args: str | Path, cwd: Path, timeout: float = 300) -> str:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _tracked(*paths: str) -> list[str]:
    """The files git tracks (under `paths`), as paths from the repository's root."""
    listed = _run("git", "ls-files", "-z", "--", *paths, cwd=ROOT)
    return [name for name in listed.split("\0") if name]


def _source_tree(target: Path) -> Path:
    """A copy of the checkout's files (tracked, and new ones git does not ignore): what
    a clone with this work in it holds, without .venv, caches, build/ or egg-info."""
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is left out
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert ROOT not in base.parents
    source = _source_tree(base / "source")
    dist = base / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, source, cwd=base)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    _run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist, cwd=base)

    venv = base / "venv"
    python = getattr(sys, "_base_executable", None) or sys.executable
    _run(python, "-m", "venv", "--without-pip", venv, cwd=base)
    pip = (sys.executable, "-m", "pip", "--python", venv / "bin" / "python")
    _run(*pip, "install", "--quiet", "--no-deps", "--no-index", wheel, cwd=base)
    purelib = _run(
        venv / "bin" / "python",
        "-c",
        "import sysconfig; print(sysconfig.get_path('purelib'))",
        cwd=base,
    ).strip()
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    Path(purelib, "zz_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    outside = base / "elsewhere"
    outside.mkdir()
    return Installed(wheel, sdist, venv, outside)


def test_pip_finds_every_requirement_of_the_all_extra(installed: Installed) -> None:
    report = installed.outside / "report.json"
    result = installed.run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        installed.python,
        "install",
        "--dry-run",
        "--no-index",
        "--quiet",
        "--report",
        report,
        f"{installed.wheel}[all]",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    would_install = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert would_install == [], "run `make setup-test`: the test venv lacks part of [all]"


def test_the_wheel_holds_the_packages_and_their_data(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        (metadata_name,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    version = metadata["Version"]
    assert installed.wheel.name == f"turnbon_graph-{version}-py3-none-any.whl"
    assert {n.split("/")[0] for n in names} == {*PACKAGES, f"turnbon_graph-{version}.dist-info"}
    for package in PACKAGES:
        assert f"{package}/py.typed" in names, package
    assert "turnbon_graph/analysis/rubrics.yaml" in names
    for package in PACKAGES[2:]:
        assert f"{package}/README.md" in names, package
    shipped = _tracked(TASKS)
    assert shipped, TASKS
    missing = [n for n in shipped if "turnbon_terminal/tasks/" + n[len(TASKS) :] not in names]
    assert missing == []

    requires = metadata.get_all("Requires-Dist") or []
    core = [r for r in requires if "extra ==" not in r]
    assert not any(r.startswith("pytest") for r in core), core
    extras = set(metadata.get_all("Provides-Extra") or [])
    wanted = {
        "all",
        "serve",
        "ray",
        "local",
        "plots",
        "notebooks",
        "terminal",
        "bfcl",
        "docs",
        "harbor",
    }
    assert wanted <= extras
    assert metadata["Name"] == "turnbon-graph" and metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_payload(), "the README is the long description"


def test_the_installed_wheel_is_what_imports(installed: Installed) -> None:
    code = """
import json
from importlib import resources
from importlib.metadata import distribution, version
import turnbon_graph, turnbon_local, turnbon_terminal, turnbon_bfcl, turnbon_harbor, turnbon_inspect
from turnbon_graph.analysis.judge import load_rubrics
from turnbon_terminal import load_tasks
modules = (
    turnbon_graph, turnbon_local, turnbon_terminal, turnbon_bfcl, turnbon_harbor, turnbon_inspect
)
print(json.dumps({
    "files": [m.__file__ for m in modules],
    "version": turnbon_graph.__version__,
    "metadata": version("turnbon-graph"),
    "located": str(distribution("turnbon-graph").locate_file("")),
    "typed": [resources.files(m.__name__).joinpath("py.typed").is_file() for m in modules],
    "rubrics": len(load_rubrics()),
    "tasks": len(load_tasks()),
}))
"""
    result = installed.run(installed.python, "-c", code)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    for file in found["files"]:
        assert installed.venv in Path(file).parents, file
    assert installed.venv in Path(found["located"]).parents
    wheel_version = installed.wheel.name.split("-")[1]
    assert found["version"] == found["metadata"] == wheel_version
    assert found["typed"] == [True] * len(PACKAGES)
    assert found["rubrics"] > 0
    shipped_tasks = {name[len(TASKS) :].split("/")[0] for name in _tracked(TASKS)}
    assert found["tasks"] == len(shipped_tasks)


def test_turnbon_version(installed: Installed) -> None:
    result = installed.run("turnbon", "--version")
    assert result.returncode == 0, result.stderr
    assert installed.wheel.name.split("-")[1] in result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the terminal sandbox needs bwrap")
def test_turnbon_demo_on_the_stub_from_outside_the_repository(installed: Installed) -> None:
    result = installed.run("turnbon", "demo", "--model", "stub", "--seed", "1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Task largest-file" in result.stdout
    assert "Verdict: PASS" in result.stdout
    for folder in ("turnbon_graph", "integrations"):  # no traceback through the checkout
        assert str(ROOT / folder) not in result.stdout + result.stderr


def test_the_readmes_offline_example_runs_from_outside_the_repository(
    installed: Installed,
) -> None:
    from tests.integration_tests.test_readme import EXAMPLES

    (example,) = [e for e in EXAMPLES if e.page == ROOT / "README.md"]
    script = installed.outside / "readme_example.py"
    script.write_text(example.code, encoding="utf-8")
    result = installed.run(installed.python, script)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert example.prints is not None
    printed = result.stdout.splitlines()
    assert printed[-len(example.prints) :] == list(example.prints)
    for folder in ("turnbon_graph", "integrations"):  # the wheel's code, not the checkout's
        assert str(ROOT / folder) not in result.stdout + result.stderr
