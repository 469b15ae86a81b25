"""A fork of a container episode: a new container whose files are a copy of the
episode's at this moment, for the search strategies that branch (beam, particle,
lookahead).

The running container is committed to an image (paused meanwhile: no process writes
while its files are read), and the fork starts from that image with the same task,
budget and network. The engine's commit leaves out volumes: when the working directory
is the storage volume, the fork's own volume is emptied and the episode's working
directory is streamed into it (`<engine> cp` as a tar archive, from one container to
the other). Processes do not carry over, as in the host sandbox's forks. The committed
image belongs to the fork, and is removed when the fork is closed.
"""

from __future__ import annotations

import dataclasses
import secrets

from turnbon_terminal.container.engine import ContainerError
from turnbon_terminal.container.images import IMAGE_PREFIX, EpisodeImage
from turnbon_terminal.container.instance import Container
from turnbon_terminal.container.owners import IMAGE_OWNER_LABEL, current_owner
from turnbon_terminal.errors import SandboxError

FORK_TIMEOUT_S = 600.0
_EMPTY = 'cd "$1" && rm -rf -- ./* ./.[!.]* ./..?*'


async def fork_container(parent: Container) -> Container:
    """A new, started container holding a copy of `parent`'s files (see the module)."""
    if parent.closed:
        raise SandboxError("this episode is closed: fork it before closing it")
    engine = parent.engine
    image = EpisodeImage(f"{IMAGE_PREFIX}fork:{parent.name}-{secrets.token_hex(3)}", own=True)
    await engine.call(
        "commit", "--pause=true", "--change", f"LABEL {IMAGE_OWNER_LABEL}={current_owner()}",
        parent.name, image.name, limit_s=FORK_TIMEOUT_S,
    )  # fmt: skip
    spec = dataclasses.replace(parent.spec, workdir=parent.workdir)
    try:
        child = await parent.host.create(
            f"{parent.name.removeprefix('turnbon-')}-fork",
            spec,
            network=parent.network,
            budget=parent.budget,
            lifetime_s=parent.lifetime_s,
            image=image,
        )
    except BaseException:
        await engine.remove("image", [image.name])
        raise
    try:
        if parent.volume is not None or child.volume is not None:
            await _copy_workdir(parent, child)
    except BaseException:
        await child.close()
        raise
    return child


async def _copy_workdir(parent: Container, child: Container) -> None:
    """The child's working directory made a copy of the parent's (the commit left it
    out: it is a volume on one side at least)."""
    emptied = await child.execute(
        ["sh", "-c", _EMPTY, "sh", child.workdir], time_limit=120, root=True
    )
    if not emptied.ok:
        raise ContainerError(f"could not empty the fork's {child.workdir}: {emptied.output}")
    await parent.engine.pipe(
        ["cp", f"{parent.name}:{parent.workdir}/.", "-"],
        ["cp", "-", f"{child.name}:{child.workdir}"],
        limit_s=FORK_TIMEOUT_S,
    )
