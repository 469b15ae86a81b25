"""The image an episode's container runs: the task's `docker_image`, or its
`environment/Dockerfile` built.

A built image is named after the hash of its build context (every file's path, mode
and content), `localhost/turnbon-task-<hash>`. By default each episode builds its own
tag and removes it when it ends (the engine's build cache spares the steps whose layers
it still holds); with `keep_images=True` (or `TURNBON_KEEP_IMAGES=1`) the image is
built once, tagged `:cached`, and reused by every later episode and run with the same
context, until you remove it (`podman rmi` of the images labelled `turnbon.image`).
A `docker_image` is pulled when it is not here (under Podman by its full name: a short
one is Docker Hub's, as Docker reads it), and never removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.container.engine import ContainerError, Engine
from turnbon_terminal.container.owners import IMAGE_LABEL, IMAGE_OWNER_LABEL
from turnbon_terminal.task.tb2 import ContainerSpec

KEEP_IMAGES_VARIABLE = "TURNBON_KEEP_IMAGES"
"""Set to 1 (or true): keep built images for later episodes (`keep_images=None` reads it)."""
IMAGE_PREFIX = "localhost/turnbon-task-"
CACHED_TAG = "cached"


@dataclass(frozen=True)
class EpisodeImage:
    """The image to run, and whether the episode built it for itself (and removes it)."""

    name: str
    own: bool = False


async def episode_image(
    engine: Engine, spec: ContainerSpec, *, episode: str, owner: str, keep: bool
) -> EpisodeImage:
    """The image for one episode of the task `spec` describes (built or pulled now)."""
    if spec.image is not None:
        name = qualified(spec.image) if engine.name == "podman" else spec.image
        if not await engine.exists("image", name):
            try:
                await engine.call("pull", name, limit_s=spec.build_timeout_s)
            except ContainerError as exc:
                raise ContainerError(
                    f"the task's image {name} could not be pulled ({exc}); check its name "
                    "(docker_image in task.toml) and that its registry is reachable from here"
                ) from None
        return EpisodeImage(name)
    assert spec.dockerfile is not None
    context = spec.dockerfile.parent
    digest = await asyncio.to_thread(context_hash, context)
    if keep:
        name = f"{IMAGE_PREFIX}{digest}:{CACHED_TAG}"
        if not await engine.exists("image", name):
            await _build(engine, spec, name, [f"{IMAGE_LABEL}={digest}"])
        return EpisodeImage(name)
    tag = re.sub(r"[^a-z0-9_.-]+", "-", episode.lower()).strip(".-")[:100] or "episode"
    name = f"{IMAGE_PREFIX}{digest}:{tag}"
    await _build(engine, spec, name, [f"{IMAGE_LABEL}={digest}", f"{IMAGE_OWNER_LABEL}={owner}"])
    return EpisodeImage(name, own=True)


async def _build(engine: Engine, spec: ContainerSpec, name: str, labels: list[str]) -> None:
    assert spec.dockerfile is not None
    flags = [option for label in labels for option in ("--label", label)]
    try:
        await engine.call(
            "build",
            "-q",
            *flags,
            "-t",
            name,
            "-f",
            str(spec.dockerfile),
            str(spec.dockerfile.parent),
            limit_s=spec.build_timeout_s,
        )
    except ContainerError as exc:
        raise ContainerError(
            f"the task's image did not build from {spec.dockerfile} ({exc}); fix its "
            "Dockerfile, or check that the images it starts FROM can be pulled here"
        ) from None


def qualified(image: str) -> str:
    """A Docker Hub image's full name, as Docker reads a short one (`org/name:tag` is
    `docker.io/org/name:tag`, `name:tag` is `docker.io/library/name:tag`): Podman
    resolves short names only where its registries.conf lists registries to search."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return image  # it names its registry
    return f"docker.io/{image}" if slash else f"docker.io/library/{image}"


def context_hash(context: Path) -> str:
    """16 hex digits of SHA-256 over every file of a build context: its path, mode,
    and content (a link's target), in a fixed order (blocking)."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(context):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            relative = path.relative_to(context).as_posix()
            info = path.lstat()
            digest.update(f"{relative}\0{info.st_mode:o}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            else:
                with open(path, "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        digest.update(chunk)
            digest.update(b"\0")
    return digest.hexdigest()[:16]


def keep_images_by_default() -> bool:
    """Whether `$TURNBON_KEEP_IMAGES` asks to keep built images."""
    return os.environ.get(KEEP_IMAGES_VARIABLE, "").strip().lower() in ("1", "true", "yes")
