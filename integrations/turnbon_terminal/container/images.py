"""The image an episode's container runs: the task's `docker_image`, or its
`environment/Dockerfile` built.

A built image is named after its key, `localhost/turnbon-task-<key>`: 16 hex digits of
SHA-256 over its build context (every file's path, mode and content) and the image id
of each base it starts FROM that is here (the name of one that is not). By default it is
built once, tagged `:cached`, and reused by every later episode, trial and run with the
same key, until `turnbon images prune` removes it (or a changed context or base makes a
new key). Episodes, `turnbon bench` workers and Ray workers of one machine that want the
same image wait on one lock file per key (`image_lock`), so it is built once, by one of
them. `keep_images=False` (or `TURNBON_KEEP_IMAGES=0`) builds a tag of its own per
episode instead and removes it when the episode ends.

A `docker_image` is pulled when it is not here (under Podman by its full name: a short
one is Docker Hub's, as Docker reads it), and never removed; with `force_build` the
task's Dockerfile is built instead (once a process: the first episode of a run builds
again even when the image is cached, the engine's layer cache sparing what it can).

A build that fails leaves nothing: the layers it made (labelled with the key, and
untagged) are removed. An error of the engine's own storage is named as such, not as
the task's (`EngineStorageError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.container.engine import ContainerError, Engine, EngineStorageError
from turnbon_terminal.container.owners import IMAGE_LABEL, IMAGE_OWNER_LABEL
from turnbon_terminal.task.tb2 import ContainerSpec

KEEP_IMAGES_VARIABLE = "TURNBON_KEEP_IMAGES"
"""Set to 0 (or false): each episode builds its own image and removes it (`keep_images=None`
reads it; default: built images are kept)."""
IMAGE_PREFIX = "localhost/turnbon-task-"
CACHED_TAG = "cached"
LOCK_POLL_S = 0.2
"""How often an episode waiting for another's build of its image looks again."""
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.I | re.M)
_forced: set[str] = set()
"""The keys this process built with `force_build` (each is built once a process)."""


@dataclass(frozen=True)
class EpisodeImage:
    """The image to run, and whether the episode built it for itself (and removes it)."""

    name: str
    own: bool = False


async def episode_image(
    engine: Engine,
    spec: ContainerSpec,
    *,
    episode: str,
    owner: str,
    keep: bool,
    force_build: bool = False,
) -> EpisodeImage:
    """The image for one episode of the task `spec` describes (built or pulled now)."""
    if spec.image is not None and not force_build:
        name = qualified(spec.image) if engine.name == "podman" else spec.image
        if not await engine.exists("image", name):
            try:
                await engine.call("pull", name, limit_s=spec.build_timeout_s)
            except EngineStorageError:
                raise
            except ContainerError as exc:
                raise ContainerError(
                    f"the task's image {name} could not be pulled ({exc}); check its name "
                    "(docker_image in task.toml) and that its registry is reachable from here"
                ) from None
        return EpisodeImage(name)
    if spec.dockerfile is None:
        raise ContainerError(
            f"force_build (--force-build) builds the task's environment/Dockerfile, and "
            f"this task has none: it names only the image {spec.image}; run it without "
            "--force-build"
        )
    key = await image_key(engine, spec.dockerfile)
    labels = [f"{IMAGE_LABEL}={key}"]
    if keep:
        name = f"{IMAGE_PREFIX}{key}:{CACHED_TAG}"
        async with image_lock(key):
            again = force_build and key not in _forced
            if again or not await engine.exists("image", name):
                await _build(engine, spec, name, labels, key)
                if force_build:
                    _forced.add(key)
        return EpisodeImage(name)
    tag = re.sub(r"[^a-z0-9_.-]+", "-", episode.lower()).strip(".-")[:100] or "episode"
    name = f"{IMAGE_PREFIX}{key}:{tag}"
    await _build(engine, spec, name, [*labels, f"{IMAGE_OWNER_LABEL}={owner}"], key)
    return EpisodeImage(name, own=True)


async def _build(
    engine: Engine, spec: ContainerSpec, name: str, labels: list[str], key: str
) -> None:
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
        await _remove_failed_layers(engine, key)
        if isinstance(exc, EngineStorageError):
            raise
        raise ContainerError(
            f"the task's image did not build from {spec.dockerfile} ({exc}); fix its "
            "Dockerfile, or check that the images it starts FROM can be pulled here"
        ) from None


async def _remove_failed_layers(engine: Engine, key: str) -> None:
    """The untagged layers a failed build of `key` left (they carry its label; those of
    an earlier build that succeeded are its image's parents, never untagged leaves)."""
    with contextlib.suppress(ContainerError, OSError):
        left = await engine.lines(
            "images", "-a", "-q", "--filter", f"label={IMAGE_LABEL}={key}",
            "--filter", "dangling=true",
        )  # fmt: skip
        await engine.remove("image", left)


@contextlib.asynccontextmanager
async def image_lock(key: str) -> AsyncIterator[None]:
    """Holds the lock file of the image `key`, shared by every process of this user on
    this machine (an advisory `flock`, released when its holder ends, however it ends);
    waits without blocking the event loop."""
    path = lock_path(key)

    def opened() -> int:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    fd = await asyncio.to_thread(opened)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock


def lock_path(key: str) -> Path:
    """The lock file of the image `key`: one folder per user of this machine."""
    return Path(tempfile.gettempdir(), f"turnbon-images-{os.getuid()}", f"{key}.lock")


async def image_key(engine: Engine, dockerfile: Path) -> str:
    """The key of the image `dockerfile` builds: its context's files and its bases."""
    context = await asyncio.to_thread(context_hash, dockerfile.parent)
    text = await asyncio.to_thread(dockerfile.read_text, encoding="utf-8", errors="replace")
    bases = []
    stages = set()
    for match in _FROM.finditer(text):
        base, stage = match[1], match[2]
        if stage:
            stages.add(stage.lower())
        if base.lower() in stages or "$" in base or base == "scratch":
            continue
        name = qualified(base) if engine.name == "podman" else base
        said = await engine.call("image", "inspect", "--format", "{{.Id}}", name, check=False)
        ident = said.out.decode(errors="replace").strip() if said.code == 0 else ""
        bases.append(f"{base}={ident or 'absent'}")
    digest = hashlib.sha256(context.encode())
    digest.update("\0".join(bases).encode())
    return digest.hexdigest()[:16]


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
    """Whether built images are kept: yes, unless `$TURNBON_KEEP_IMAGES` says 0 or false."""
    return os.environ.get(KEEP_IMAGES_VARIABLE, "").strip().lower() not in ("0", "false", "no")
