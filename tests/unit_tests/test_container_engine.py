"""Which container engine runs container tasks, and what is said when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container_tasks import HELLO
from turnbon_graph.cli import main
from turnbon_graph.errors import ConfigurationError
from turnbon_terminal import ContainerError, TerminalEnvironment
from turnbon_terminal.container.engine import Engine


def _only(tmp_path: Path, *names: str) -> str:
    """A PATH holding only executables named `names` (empty scripts)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return str(folder)


def test_podman_comes_first_and_the_variable_picks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", _only(tmp_path, "podman", "docker"))
    monkeypatch.delenv("TURNBON_ENGINE", raising=False)
    assert Engine.find().name == "podman"
    monkeypatch.setenv("TURNBON_ENGINE", "docker")
    assert Engine.find().name == "docker"
    assert Engine.find("podman").name == "podman"  # the option over the variable
    monkeypatch.setenv("TURNBON_ENGINE", "lxc")
    with pytest.raises(ConfigurationError, match=r"\$TURNBON_ENGINE must be one of podman, docker"):
        Engine.find()


def test_without_an_engine_a_container_task_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", _only(tmp_path))
    monkeypatch.delenv("TURNBON_ENGINE", raising=False)
    with pytest.raises(ContainerError, match="podman or docker is not installed"):
        TerminalEnvironment(HELLO)
    assert main(["run", str(HELLO), "--model", "stub"]) == 2
    err = capsys.readouterr().err
    assert "this task runs in a container: install Podman" in err
    assert "make setup-podman" in err and "Traceback" not in err
