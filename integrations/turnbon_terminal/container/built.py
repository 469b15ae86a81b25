"""The images built from tasks' Dockerfiles (labelled `turnbon.image` with their key):
listed and removed for `turnbon images`."""

from __future__ import annotations

from collections.abc import Sequence

from turnbon_terminal.container.engine import Engine
from turnbon_terminal.container.owners import IMAGE_LABEL

_FILTER = f"label={IMAGE_LABEL}"
_SHOWN = "{{.Repository}}:{{.Tag}}  {{.Size}}  {{.CreatedSince}}"


async def list_built(engine: Engine) -> list[str]:
    """One line per built image: its name, size and when it was made."""
    return await engine.lines(
        "images",
        "--filter",
        _FILTER,
        "--format",
        "{{.Repository}}:{{.Tag}}  {{.Size}}  {{.CreatedSince}}",
    )


async def prune_built(engine: Engine, keys: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Removes the built images (and the untagged layers of failed builds) that no
    container uses: all of them, or those of the image keys `keys`.

    Returns:
        The ids removed, and the names of those kept because a container uses them.
    """
    filters = [f"{_FILTER}={key}" for key in keys] or [_FILTER]
    ids = [i for f in filters for i in await engine.lines("images", "-a", "-q", "--filter", f)]
    removed, kept = [], []
    for ident in dict.fromkeys(ids):
        done = await engine.call("rmi", ident, check=False)  # never -f: in use stays
        if done.code == 0:
            removed.append(ident)
        elif await engine.exists("image", ident):
            names = await engine.lines("image", "inspect", "--format", "{{.RepoTags}}", ident)
            kept.append(names[0] if names else ident)
    return removed, kept
