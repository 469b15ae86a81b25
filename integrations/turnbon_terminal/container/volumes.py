"""A container episode's storage budget: its working directory on an ext4 file system
of `storage_mb`, as a volume of the engine.

The engines' own size option (`--storage-opt size=`) needs an XFS host with project
quotas, which few machines have. So, as root, each episode gets a sparse image file (in
its host folder) with an empty ext4 file system, which the engine loop-mounts as a named
volume on the working directory; being empty, it is filled with the image's files there
when the container starts. A write past `storage_mb` in the working directory then
fails with ENOSPC. The rest of the container's file system (/tmp, /root, /usr, ...) is
not bounded by it. Elsewhere (not root, no `mkfs.ext4`/`debugfs`, an engine that
refuses the volume) storage is not bounded, and a warning says why, once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from turnbon_terminal.container.engine import Engine
from turnbon_terminal.container.owners import OWNER_LABEL
from turnbon_terminal.errors import SandboxError
from turnbon_terminal.host.disk import FULL_BELOW_BYTES, IMAGE_NAME, format_image, run_tool
from turnbon_terminal.task.enforcement import BudgetNotEnforcedWarning
from turnbon_terminal.task.envvars import SAFE_PATH


@dataclass
class StorageSupport:
    """Whether container episodes get a bounded working directory here (decided once,
    on the first episode; a failure then turns it off for the rest, with a warning)."""

    tools: tuple[str, str] | None = None
    """(mkfs.ext4, debugfs), or None with `reason`."""
    reason: str = ""
    warned: bool = field(default=False, repr=False)

    @classmethod
    def detect(cls, enabled: bool = True) -> StorageSupport:
        if not enabled:
            return cls(None, "budgets are off (enforce_budgets=False)", warned=True)
        if os.geteuid() != 0:
            return cls(None, "a loop-mounted volume per episode needs root")
        mkfs, debugfs = (shutil.which(n, path=SAFE_PATH) for n in ("mkfs.ext4", "debugfs"))
        if mkfs is None or debugfs is None:
            return cls(None, "mkfs.ext4 or debugfs is missing (`apt-get install -y e2fsprogs`)")
        return cls((mkfs, debugfs))

    def off(self, reason: str) -> None:
        """No bounded volumes from now on (one could not be made: `reason`)."""
        self.tools, self.reason = None, reason
        self.warn()

    def warn(self) -> None:
        """Says once that storage_mb is not enforced, and why."""
        if self.tools is None and not self.warned:
            self.warned = True
            warnings.warn(
                f"turnbon_terminal: storage_mb is NOT enforced for container tasks "
                f"({self.reason}); memory_mb and cpus are (the engine's flags)",
                BudgetNotEnforcedWarning,
                stacklevel=3,
            )


async def storage_volume(
    engine: Engine, support: StorageSupport, folder: Path, name: str, storage_mb: int, owner: str
) -> str | None:
    """A new volume `name` of `storage_mb` whose image lives in `folder`; None when
    storage cannot be bounded here (warned once)."""
    if support.tools is None:
        support.warn()
        return None
    mkfs, debugfs = support.tools
    image = folder / IMAGE_NAME
    try:
        await asyncio.to_thread(_empty_ext4, image, storage_mb, mkfs, debugfs)
        await engine.call(
            "volume",
            "create",
            "--label",
            f"{OWNER_LABEL}={owner}",
            "--opt",
            "type=ext4",
            "--opt",
            f"device={image}",
            "--opt",
            "o=loop,nosuid,nodev",
            name,
        )
    except (SandboxError, OSError) as exc:
        support.off(f"the volume could not be made: {exc}")
        return None
    return name


def _empty_ext4(image: Path, storage_mb: int, mkfs: str, debugfs: str) -> None:
    """An ext4 image with nothing in it, not even lost+found: the engine copies the
    image's working directory only into an empty volume (blocking)."""
    format_image(image, storage_mb, mkfs)
    run_tool([debugfs, "-w", "-R", "rmdir lost+found", str(image)])


def is_full(mountpoint: str) -> bool:
    """Whether the volume mounted at `mountpoint` (on this machine) refused a write for
    want of space or inodes (blocking; False when it cannot be read)."""
    try:
        stats = os.statvfs(mountpoint)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES or stats.f_favail == 0
