"""Dedicated user ids for episodes, and ending every process of one.

Running as root, each episode gets a uid of its own (no passwd entry needed): its
workdir is private to it (mode 700), RLIMIT_NPROC bounds it alone, and "every process
of this uid" is exactly the episode's processes, however they detached. A uid is
leased with an flock on a file in one root-only directory for the whole machine
(`LEASE_DIR`, whatever a run's work root), so concurrent runs, in this process or
another, never share one; a crashed run's leftovers (processes, its episode directory,
recorded in the lock file) are cleared when the uid is leased again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.errors import SandboxError
from turnbon_terminal.host.disk import IMAGE_NAME, MOUNT_NAME
from turnbon_terminal.host.workroot import private_dir, remove_tree
from turnbon_terminal.task.envvars import SAFE_PATH

UID_BASE = 1_500_000
"""Far above login users and the usual subordinate-uid ranges (100000-165535)."""
UID_COUNT = 1000
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
"""World-writable places where an episode's files could outlive it and be found by the
next holder of its uid; cleared at lease and at release (top level only)."""
LEASE_DIR = (
    Path("/run/turnbon-terminal-uids")
    if os.path.isdir("/run")
    else Path("/tmp/turnbon-terminal-uids")
)
"""One lock file per uid, for every run on the machine (never below a work root: two
runs with different work roots must not lease the same uid)."""


@dataclass
class UidLease:
    """One uid (and the gid of the same number), held until `release`."""

    uid: int
    _fd: int

    @property
    def gid(self) -> int:
        return self.uid

    def record(self, episode: Path) -> None:
        """Notes in the lock file the episode directory holding the uid's files, so the
        next holder removes it if this run crashes."""
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, os.fsencode(episode), 0)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing drops the flock
            self._fd = -1


def lease_uid(
    base: int = UID_BASE,
    count: int = UID_COUNT,
    lock_dir: Path = LEASE_DIR,
    *,
    clear: Callable[[Path], None] | None = None,
) -> UidLease:
    """The first free uid of the range, its leftovers (processes, files) cleared;
    `clear` first undoes what else a crashed episode left (mounts, control groups)."""
    private_dir(lock_dir, 0o700)
    for uid in range(base, base + count):
        if _has_account(uid):
            continue
        fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        kill_user(uid)
        remove_user_files(uid)
        _remove_recorded(fd, uid, clear)
        return UidLease(uid, fd)
    raise SandboxError(
        f"all {count} sandbox uids from {base} are in use (locks in {lock_dir}); "
        "run fewer episodes at once, or pass a larger uid range"
    )


def _remove_recorded(fd: int, uid: int, clear: Callable[[Path], None] | None) -> None:
    """Removes the episode directory a crashed holder of `uid` recorded, if it is still
    there and its workdir is the uid's (the lock was free: no live episode owns it)."""
    recorded = os.pread(fd, 4096, 0)
    if not recorded:
        return
    episode = Path(os.fsdecode(recorded))
    if _held_by(episode, uid):
        if clear is not None:
            clear(episode)
        remove_tree(episode)


def _held_by(episode: Path, uid: int) -> bool:
    """Whether `episode` is still the directory of an episode of `uid`: its workdir is
    the uid's (on the episode's file system, mounted or not: then its image is there)."""
    for work in (episode / MOUNT_NAME / "work", episode / "work"):
        with contextlib.suppress(OSError):
            if work.lstat().st_uid == uid:
                return True
    return (episode / IMAGE_NAME).is_file()


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose real, effective or saved uid is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue  # gone meanwhile
        state, uids = "", [""]
        for line in status.splitlines():
            if line.startswith("State:"):
                state = line[6:].strip()
            elif line.startswith("Uid:"):
                uids = line[4:].split()[:3]
        if str(uid) in uids and not state.startswith("Z"):
            found.append(int(entry.name))
    return found


def kill_user(uid: int, *, timeout: float = 5.0) -> bool:
    """SIGKILLs every process of `uid`; True once none is left (zombies aside).

    The kill is sent by a helper running as `uid` itself: kill(-1, SIGKILL) reaches all
    of that user's processes in one pass under the kernel's task-list lock, so a fork
    bomb cannot fork faster than it is killed (killing pid by pid from a /proc scan can
    lose that race)."""
    bash = shutil.which("bash", path=SAFE_PATH) or "/bin/bash"
    deadline = time.monotonic() + timeout
    while True:
        if not processes_of(uid):
            return True
        if time.monotonic() > deadline:
            return False
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [bash, "-c", "kill -KILL -1 2>/dev/null; exit 0"],
                user=uid,
                group=uid,
                extra_groups=[],
                env={"PATH": SAFE_PATH},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        time.sleep(0.02)


def remove_user_files(uid: int) -> None:
    """Removes what `uid` left at the top level of /tmp, /var/tmp and /dev/shm."""
    for place in SHARED_TMP:
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Gives `root` and everything below it to uid:gid, never following a symlink."""
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), uid, gid)
