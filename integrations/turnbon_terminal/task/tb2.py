"""What a Terminal-Bench 2 task folder says about its container, read from its files.

    environment/Dockerfile    built into the episode's image (the folder is the context)
    task.toml [environment]   docker_image (used instead of building, as Harbor does),
                              workdir (default: the image's WORKDIR, else /app),
                              network_mode ("public" | "no-network") or the older
                              allow_internet = true/false (default: no network),
                              env (literal values), build_timeout_sec,
                              memory_mb / memory, storage_mb / storage, cpus (the budget,
                              read by `turnbon_terminal.task.folders`)
    tests/test.sh             the verifier, run in the container after the agent

A compose file (`environment/docker-compose.yaml`, extra services) is refused: one
container per episode is what runs here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnbon_terminal.errors import DockerRequiredError, TaskFormatError

DOCKERFILE = "Dockerfile"
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
TEST_SCRIPT = "test.sh"
DEFAULT_WORKDIR = "/app"
DEFAULT_BUILD_TIMEOUT_S = 600.0
"""Terminal-Bench 2's (and Harbor's) default `build_timeout_sec`."""
NETWORK_MODES = {"public": True, "no-network": False}


class NetworkModeWarning(UserWarning):
    """A task asks for a network setting per phase ([agent] or [verifier]
    network_mode): its environment's setting applies to both phases."""


@dataclass(frozen=True)
class ContainerSpec:
    """How a task's container is made and run."""

    dockerfile: Path | None = None
    """environment/Dockerfile, built with environment/ as its context."""
    image: str | None = None
    """`docker_image`: an image to run as it is (pulled when it is not here)."""
    workdir: str | None = None
    """`[environment] workdir`; None: the image's WORKDIR, else /app."""
    env: Mapping[str, str] = field(default_factory=dict)
    """`[environment] env`: set in the container (literal values, nothing of the host)."""
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    """`[environment] build_timeout_sec`: how long building or pulling the image may take."""

    def describe(self) -> str:
        """The image in words.

        Returns:
            "image NAME", or "built from PATH/Dockerfile".
        """
        return f"image {self.image}" if self.image else f"built from {self.dockerfile}"


def compose_file(folder: Path) -> str | None:
    """The compose file of the task's environment, if it has one."""
    return next((n for n in COMPOSE_FILES if (folder / "environment" / n).exists()), None)


def container_spec(
    folder: Path, environment: Mapping[str, Any], build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
) -> ContainerSpec | None:
    """The container of the task in `folder` (its `[environment]` table given, and its
    `build_timeout_sec` as read), or None when it names no image and has no Dockerfile
    (a task for the host sandbox)."""
    compose = compose_file(folder)
    if compose is not None:
        raise DockerRequiredError(
            f"task {folder.name} describes its environment with environment/{compose} "
            "(several services): only a single container (environment/Dockerfile or "
            "[environment] docker_image) runs here. Run it with Harbor "
            "(`harbor run -p <task>`), or pass skip_docker=True to skip such tasks"
        )
    image = environment.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise TaskFormatError(f"{folder / 'task.toml'}: docker_image must be an image name")
    dockerfile = folder / "environment" / DOCKERFILE
    if image is None and not dockerfile.is_file():
        return None
    workdir = environment.get("workdir")
    if workdir is not None and (not isinstance(workdir, str) or not workdir.startswith("/")):
        raise TaskFormatError(f"{folder / 'task.toml'}: workdir must be an absolute path")
    return ContainerSpec(
        dockerfile=dockerfile if dockerfile.is_file() else None,
        image=image.strip() if image else None,
        workdir=workdir,
        env=_literal_env(environment, folder),
        build_timeout_s=build_timeout_s,
    )


def network_allowed(config: Mapping[str, Any], folder: Path) -> bool:
    """Whether the task's commands may reach the network: `[environment] network_mode`
    ("public" or "no-network"), else the older `allow_internet`, else no. A phase's
    own `network_mode` ([agent], [verifier]) is not applied: warned about."""
    environment = config.get("environment") or {}
    where = folder / "task.toml"
    mode = environment.get("network_mode")
    if mode is not None:
        allowed = _mode(mode, where, "[environment]")
    else:
        flag = environment.get("allow_internet", False)
        if not isinstance(flag, bool):
            raise TaskFormatError(f"{where}: allow_internet must be true or false")
        allowed = flag
    for phase in ("agent", "verifier"):
        table = config.get(phase) or {}
        own = table.get("network_mode") if isinstance(table, dict) else None
        if own is not None and _mode(own, where, f"[{phase}]") != allowed:
            warnings.warn(
                f"{where}: [{phase}] network_mode = {own!r} is not applied; the "
                f"environment's setting ({'public' if allowed else 'no-network'}) holds "
                "for the agent and the verifier alike",
                NetworkModeWarning,
                stacklevel=2,
            )
    return allowed


def _mode(value: Any, where: Path, table: str) -> bool:
    if value == "allowlist":
        raise TaskFormatError(
            f"{where}: {table} network_mode = 'allowlist' is not supported here: use "
            "'public' (with allowed_hosts left out) or 'no-network'"
        )
    if value not in NETWORK_MODES:
        raise TaskFormatError(
            f"{where}: {table} network_mode must be one of "
            f"{', '.join(map(repr, NETWORK_MODES))}, got {value!r}"
        )
    return NETWORK_MODES[value]


def _literal_env(environment: Mapping[str, Any], folder: Path) -> dict[str, str]:
    """`[environment] env`: literal strings. Harbor expands `${VAR}` from the host; here
    nothing of the host reaches the container, so such a value is refused."""
    env = environment.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise TaskFormatError(f"{folder / 'task.toml'}: [environment] env must be strings")
    for name, value in env.items():
        if "${" in value:
            raise TaskFormatError(
                f"{folder / 'task.toml'}: [environment] env {name} = {value!r} takes a "
                "value from the host, which never reaches the container here: write the "
                "value itself"
            )
    return {str(k): v for k, v in env.items()}


def has_test_script(folder: Path) -> bool:
    """Whether the task's verifier is Terminal-Bench 2's `tests/test.sh`."""
    return (folder / "tests" / TEST_SCRIPT).is_file()
