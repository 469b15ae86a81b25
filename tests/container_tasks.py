"""Builders for the container-task tests: Terminal-Bench 2 task folders made from the
shipped test task `tests/tb2_tasks/hello-file`, and what the engine holds of a process
(no test logic, no mocks of our code)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from turnbon_terminal.container.owners import IMAGE_OWNER_LABEL, OWNER_LABEL

HELLO = Path(__file__).resolve().parent / "tb2_tasks" / "hello-file"
BASE_IMAGE = "localhost/turnbon-bookworm:latest"


@functools.cache
def podman_ready() -> str | None:
    """Why the container tests cannot run here, or None when Podman and the base
    image are present."""
    if shutil.which("podman") is None:
        return "podman is not installed (as root: make setup-podman)"
    found = subprocess.run(
        ["podman", "image", "inspect", BASE_IMAGE], capture_output=True, check=False
    )
    if found.returncode != 0:
        return f"the base image {BASE_IMAGE} is missing (make setup-podman builds it)"
    return None


needs_podman = pytest.mark.skipif(podman_ready() is not None, reason=str(podman_ready()))


def tb2_task(
    root: Path,
    name: str,
    *,
    environment: str = "",
    test_sh: str | None = None,
    verifier_timeout: float | None = None,
) -> Path:
    """A copy of hello-file named `name` under `root`, with lines added to its
    `[environment]` table, another tests/test.sh, or another verifier time limit."""
    folder = root / name
    shutil.copytree(HELLO, folder)
    toml = (folder / "task.toml").read_text()
    if environment:
        toml = toml.replace("[environment]\n", f"[environment]\n{environment}")
    if verifier_timeout is not None:
        toml = toml.replace("timeout_sec = 60.0", f"timeout_sec = {verifier_timeout}")
    (folder / "task.toml").write_text(toml)
    if test_sh is not None:
        (folder / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
    return folder


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name], check=False).returncode == 0


def labelled(kind: str, owner: str) -> list[str]:
    """The containers, volumes or images (`kind`) Podman holds for `owner`."""
    listing = {
        "container": ["ps", "-a", "-q", "--filter", f"label={OWNER_LABEL}={owner}"],
        "volume": ["volume", "ls", "-q", "--filter", f"label={OWNER_LABEL}={owner}"],
        "image": ["images", "-q", "--filter", f"label={IMAGE_OWNER_LABEL}={owner}"],
    }[kind]
    done = subprocess.run(["podman", *listing], capture_output=True, text=True, check=True)
    return done.stdout.split()


def owned_by(pid: int) -> list[str]:
    """The containers (id and owner) Podman holds for the process `pid`."""
    done = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label={OWNER_LABEL}", "--format",
         f'{{{{.ID}}}} {{{{index .Labels "{OWNER_LABEL}"}}}}'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [line for line in done.stdout.splitlines() if line.split(" ")[-1].startswith(f"{pid}:")]
