"""Who made a container, a volume or an image, and the sweep of what dead runs left.

A client killed with SIGKILL leaves its containers running: the engine's monitor
process is not its child. So everything an episode makes carries a label naming the
process that made it, `<pid>:<start time>@<host>@<boot id>` (the start time tells a
reused pid apart), its host folder (the storage volume's image, the verifier's log
folder) holds the same line in a file, and the first container episode of a process
removes whatever belongs to a process of this machine that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import socket
from pathlib import Path

from turnbon_terminal.container.engine import Engine

OWNER_LABEL = "turnbon.owner"
"""On containers and volumes: the process that made them."""
IMAGE_OWNER_LABEL = "turnbon.image-owner"
"""On images built for one episode (removed when it ends). A separate key: containers
inherit their image's labels, and a container is judged by its own."""
IMAGE_LABEL = "turnbon.image"
"""On every image built from a task's environment: the hash of its build context."""
OWNER_FILE = "owner"
"""In a host folder of an episode: the owner, as in the labels."""

_log = logging.getLogger(__name__)
_NO_VALUE = ("", "<no value>")


def current_owner() -> str:
    """This process, as its labels name it."""
    return _owner_of(os.getpid())


@functools.cache
def _owner_of(pid: int) -> str:
    return f"{pid}:{_start_time(pid)}@{socket.gethostname()}@{_boot_id()}"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]  # fields after "(comm)" start at field 3


@functools.cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def is_gone(owner: str) -> bool:
    """Whether the process `owner` names has ended. Only this machine's processes are
    judged: an owner on another host (an engine shared over the network) never is."""
    process, _, place = owner.partition("@")
    host, _, boot = place.partition("@")
    if not process or host != socket.gethostname():
        return False
    if boot != _boot_id():
        return True  # a previous boot of this machine
    pid, _, started = process.partition(":")
    if not pid.isdigit():
        return False
    return _start_time(int(pid)) != started


async def sweep(engine: Engine, folders: Path) -> int:
    """Removes the containers, volumes and per-episode images whose owner is gone, and
    their host folders under `folders`; returns how many things it removed. Never
    raises: a failed sweep must not stop a run."""
    removed = 0
    try:
        containers = await _dead(engine, ["ps", "-a", "-q"], "container", OWNER_LABEL)
        await engine.remove("container", containers)
        volumes = await _dead(engine, ["volume", "ls", "-q"], "volume", OWNER_LABEL)
        await engine.remove("volume", volumes)
        images = await _dead(engine, ["images", "-q"], "image", IMAGE_OWNER_LABEL)
        await engine.remove("image", images)
        removed = len(containers) + len(volumes) + len(images)
    except Exception as exc:  # the engine is broken: the episode's start will say so
        _log.warning("turnbon_terminal: the sweep of dead runs' containers failed: %s", exc)
    removed += await asyncio.to_thread(_sweep_folders, folders)
    if removed:
        _log.info("turnbon_terminal: removed %d things left by runs that ended", removed)
    return removed


async def _dead(engine: Engine, listing: list[str], kind: str, label: str) -> list[str]:
    """The ids of `kind` things labelled `label` whose owner is gone."""
    ids = await engine.lines(*listing, "--filter", f"label={label}")
    if not ids:
        return []
    labels = ".Labels" if kind == "volume" else ".Config.Labels"
    ident = "{{.Name}}" if kind == "volume" else "{{.Id}}"
    # Listed things may vanish before the inspect: it then fails for those alone.
    done = await engine.call(
        kind, "inspect", "--format", f'{ident} {{{{index {labels} "{label}"}}}}', *ids, check=False
    )
    dead = []
    for line in done.out.decode(errors="replace").splitlines():
        ident_value, _, owner = line.strip().partition(" ")
        if ident_value and owner not in _NO_VALUE and is_gone(owner):
            dead.append(ident_value)
    return dead


def _sweep_folders(folders: Path) -> int:
    """Removes the host folders under `folders` whose owner is gone (blocking)."""
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for folder in folders.iterdir():
            try:
                owner = (folder / OWNER_FILE).read_text().strip()
            except OSError:
                continue  # being made right now, or not ours
            if is_gone(owner):
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
    return removed
