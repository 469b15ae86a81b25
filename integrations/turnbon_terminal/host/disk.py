"""An episode's own file system, so its storage budget bounds everything it can write.

As root, with loop devices, every episode gets a sparse ext4 image of `storage_mb`
(growing on the host only as the agent writes), mounted `nosuid,nodev` at
`<episode>/fs`; its work folder, /tmp and /var/tmp live there, so the kernel answers a
write past the budget with ENOSPC whatever folder the agent chose, and closing the
episode frees the host's disk at once. Elsewhere `<episode>/fs` is a plain folder and
`DiskSupport.detect` says why storage is not bounded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.errors import SandboxError
from turnbon_terminal.task.envvars import SAFE_PATH

MOUNT_NAME = "fs"
IMAGE_NAME = "disk.img"
FULL_BELOW_BYTES = 1 << 20
"""A file system with less free space than this is full: a write was refused."""
_PROBE_MB = 16
_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DiskSupport:
    """Whether episodes get a file system of their own, with the tools to make one."""

    tools: tuple[str, str, str] | None
    """(mkfs.ext4, mount, umount), or None with `reason`."""
    reason: str = ""

    @classmethod
    def detect(cls, work_root: Path) -> DiskSupport:
        """Makes and mounts a small image under `work_root` once (blocking, tens of ms):
        only that proves loop devices work here (a container may lack them)."""
        if os.geteuid() != 0:
            return cls(None, "mounting a file system per episode needs root")
        found = [shutil.which(name, path=SAFE_PATH) for name in ("mkfs.ext4", "mount", "umount")]
        mkfs, mount, umount = found
        if mkfs is None or mount is None or umount is None:
            return cls(
                None,
                "mkfs.ext4 or mount is missing (`apt-get install -y e2fsprogs mount`)",
            )
        probe = Path(tempfile.mkdtemp(prefix="disk-probe-", dir=work_root))
        support = cls((mkfs, mount, umount))
        try:
            disk = EpisodeDisk.make(probe, _PROBE_MB, support)
            disk.release()
        except SandboxError as exc:
            return cls(None, str(exc))
        finally:
            shutil.rmtree(probe, ignore_errors=True)
        return support


@dataclass
class EpisodeDisk:
    """The folder an episode's writable folders live in, and the image behind it."""

    root: Path
    image: Path | None
    support: DiskSupport

    @classmethod
    def make(cls, episode: Path, storage_mb: int, support: DiskSupport) -> EpisodeDisk:
        """`<episode>/fs`, on an image of `storage_mb` where supported (blocking)."""
        root = episode / MOUNT_NAME
        root.mkdir(mode=0o711)
        if support.tools is None:
            return cls(root, None, support)
        mkfs, mount, _ = support.tools
        image = episode / IMAGE_NAME
        disk = cls(root, image, support)
        try:
            format_image(image, storage_mb, mkfs)
            run_tool([mount, "-o", "loop,nosuid,nodev,noatime", str(image), str(root)])
        except BaseException:
            disk.release()
            raise
        root.chmod(0o711)
        with contextlib.suppress(OSError):
            (root / "lost+found").rmdir()
        return disk

    @property
    def bounded(self) -> bool:
        return self.image is not None

    def full(self) -> bool:
        """Whether a write was (or would be) refused for want of space or inodes."""
        if self.image is None:
            return False
        stats = os.statvfs(self.root)
        return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES or stats.f_favail == 0

    def used_bytes(self) -> int:
        if self.image is None:
            return 0
        stats = os.statvfs(self.root)
        return (stats.f_blocks - stats.f_bfree) * stats.f_frsize

    def release(self) -> None:
        """Unmounts the file system and deletes its image (blocking; idempotent)."""
        if self.image is None:
            return
        if os.path.ismount(self.root):
            unmount(self.root, self.support)
        with contextlib.suppress(FileNotFoundError):
            self.image.unlink()
        self.image = None


def unmount(point: Path, support: DiskSupport) -> None:
    """Unmounts `point`; lazily when something still holds it (the loop device and its
    image are then freed as soon as the last holder lets go)."""
    umount = support.tools[2] if support.tools else shutil.which("umount", path=SAFE_PATH)
    if umount is None:
        raise SandboxError(f"cannot unmount {point}: umount is missing")
    try:
        run_tool([umount, str(point)])
    except SandboxError:
        run_tool([umount, "-l", str(point)])


def unmount_below(folder: Path) -> None:
    """Unmounts every file system mounted below `folder` (a crashed run's episode),
    deepest first (blocking)."""
    prefix = os.fsencode(os.path.realpath(folder)) + b"/"
    points: list[str] = []
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            mounted = line.split()[4].replace(b"\\040", b" ")
            if mounted.startswith(prefix):
                points.append(os.fsdecode(mounted))
    for point in sorted(points, key=len, reverse=True):
        with contextlib.suppress(SandboxError):
            unmount(Path(point), DiskSupport(None))


def format_image(image: Path, storage_mb: int, mkfs: str) -> None:
    """A sparse file of `storage_mb` (no host disk until written) holding an empty ext4
    file system, with no journal and no reserved blocks: a scratch disk that lives one
    episode (blocking)."""
    with open(image, "wb") as handle:
        handle.truncate(storage_mb << 20)
    run_tool([mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "nodiscard", str(image)])


def run_tool(argv: list[str]) -> None:
    """Runs a system tool (mkfs, mount, ...) with a fixed PATH; SandboxError with its
    message when it fails (blocking)."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={"PATH": SAFE_PATH},
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"{Path(argv[0]).name} failed: {exc}") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip()[-500:]
        raise SandboxError(
            f"{Path(argv[0]).name} failed ({said or f'exit code {done.returncode}'})"
        )
