"""The engine's own storage failures are named as the engine's, not the task's: a
stand-in CLI prints what Podman prints when another process removed a layer meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnbon_terminal.container.engine import ContainerError, Engine, EngineStorageError
from turnbon_terminal.container.images import episode_image
from turnbon_terminal.task.tb2 import ContainerSpec


def _cli(tmp_path: Path, said: str) -> Engine:
    """A CLI that fails every call saying `said`, as the engine would."""
    script = tmp_path / "podman"
    script.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 125\n")
    script.chmod(0o755)
    return Engine("podman", str(script), str(tmp_path))


async def test_a_lost_layer_is_the_engines_storage_failing(tmp_path: Path) -> None:
    engine = _cli(tmp_path, "Error: creating build container: layer not known")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "Dockerfile").write_text("FROM scratch\n")
    spec = ContainerSpec(dockerfile=tmp_path / "env" / "Dockerfile")
    with pytest.raises(EngineStorageError) as caught:
        await episode_image(engine, spec, episode="e", owner="o", keep=True)
    said = str(caught.value)
    assert "podman's own storage failed" in said and "not the task's fault" in said
    assert "Dockerfile" not in said  # the task's Dockerfile is not blamed


async def test_any_other_failure_stays_a_container_error(tmp_path: Path) -> None:
    engine = _cli(tmp_path, "Error: no container with name or ID x found")
    with pytest.raises(ContainerError) as caught:
        await engine.call("exec", "x", "true")
    assert not isinstance(caught.value, EngineStorageError)
