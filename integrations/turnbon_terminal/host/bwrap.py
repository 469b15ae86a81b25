"""The bubblewrap sandbox: what an episode's namespaces hold, and the one `bwrap` per
episode whose namespaces every command enters.

An episode's sandbox is one long-lived `bwrap` (new user, PID, mount, IPC, UTS and,
unless the task allows the internet, network namespaces) whose first process only
waits. Each command enters those namespaces with `nsenter` (so a server started in the
background by one command is reachable from the next), and at the end the sandbox's
PID 1 is SIGKILLed through a pidfd: the kernel then kills every process of the
namespace, however it detached, before PID 1 is gone.

What the sandbox sees: a read-only root with the system directories read-only (`/usr`,
`/etc`, `/bin`, `/lib` ...), a fresh `/proc`, a minimal read-only `/dev`, its own empty
`/tmp`, `/var/tmp` and `/dev/shm` (sized tmpfs, gone with it, counted in the episode's
memory), the episode's `work/` and `tmp/` at fixed paths, the same in every episode and
fork (`WORK_PLACE`, `TMP_PLACE`: the only host places it can write, on the episode's own
file system where there is one) and whatever a caller binds read-only.
Not the runner's processes, home, environment, run folders or any other episode;
package directories and task folders that happen to lie below a system directory are
masked with an empty tmpfs.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnbon_terminal.errors import SandboxError
from turnbon_terminal.task.envvars import SAFE_PATH

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `sudo apt-get update && sudo apt-get install -y "
    "bubblewrap`; Fedora: `sudo dnf install bubblewrap`), or `make setup-test` as root"
)
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Bound read-only (or recreated as the same symlink, on merged-/usr systems)."""
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")
WORK_PLACE = Path("/sandbox/work")
"""Where every episode sees its working directory (its `HOME` and `$TASK_WORKDIR`): one
path for all, forks included, so an absolute path the agent wrote into its folder (a
shebang, a virtualenv's scripts, a config file) holds in a fork of the episode too."""
TMP_PLACE = Path("/sandbox/tmp")
"""Where every episode sees its `TMPDIR` (the episode's tmp/, which a fork copies)."""
_NSENTER_FLAG = {"mnt": "mount"}
_START_TIMEOUT = 30.0
_READY = b"ready\n"


def find_tools(path: str = SAFE_PATH) -> tuple[str, str, str]:
    """(bwrap, nsenter, env) on `path`; SandboxError saying what to install."""
    found = {name: shutil.which(name, path=path) for name in ("bwrap", "nsenter", "env")}
    if found["bwrap"] is None:
        raise SandboxError(
            f"bwrap (bubblewrap) was not found on {path}, and the terminal sandbox "
            f"needs it: {INSTALL_HINT}. To run without it, with far weaker isolation, "
            "pass sandbox='uid' to TerminalEnvironment"
        )
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise SandboxError(
            f"{' and '.join(missing)} not found on {path}: install util-linux and "
            "coreutils (`apt-get install -y util-linux coreutils`)"
        )
    return found["bwrap"] or "", found["nsenter"] or "", found["env"] or ""


@dataclass(frozen=True)
class Layout:
    """The options of one `bwrap`: namespaces, mounts, environment, working directory."""

    writable: Sequence[Path]
    """Host directories bound read-write (the episode's work/, tmp/), each at its path in
    `places`, else at the same path."""
    readonly: Sequence[Path] = ()
    """Host paths bound read-only at the same path (the verifier's tests, pytest)."""
    hidden: Sequence[Path] = ()
    """Host paths to mask with an empty read-only tmpfs when a system bind shows them."""
    network: bool = False
    tmpfs_bytes: int = 1 << 30
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    places: Mapping[Path, Path] = field(default_factory=dict)
    """Where a writable host directory is bound inside (`WORK_PLACE`, `TMP_PLACE`)."""
    init: bool = True
    """bwrap's own PID 1 reaps the sandbox's orphans. False: the command is PID 1
    (`--as-pid-1`), for a one-off command whose exit ends the sandbox: bwrap's init
    outlives the exit status it reports, and where the host's init does not reap
    (some containers) it would stay a zombie."""

    def options(self) -> list[str]:
        args = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
        ]
        if not self.network:
            args.append("--unshare-net")
        if not self.init:
            args.append("--as-pid-1")
        args += _system_mounts()
        for path in _masked(self.hidden):
            args += ["--tmpfs", path, "--remount-ro", path]
        args += ["--proc", "/proc", "--tmpfs", "/dev"]
        for name in DEVICES:
            args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
        for number, name in enumerate(("stdin", "stdout", "stderr")):
            args += ["--symlink", f"/proc/self/fd/{number}", f"/dev/{name}"]
        args += ["--symlink", "/proc/self/fd", "/dev/fd"]
        for place in ("/tmp", "/var/tmp", "/dev/shm"):
            args += ["--perms", "1777", "--size", str(self.tmpfs_bytes), "--tmpfs", place]
        if self.network and Path("/run/systemd/resolve").is_dir():
            args += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
        for bound in self.writable:
            args += ["--bind", str(bound), str(self.places.get(bound, bound))]
        for bound in self.readonly:
            args += ["--ro-bind", str(bound), str(bound)]
        # Last, once every mount point exists: the root and /dev (tmpfs bwrap made, of
        # half the host's memory) take no files; the mounts on them keep their own mode.
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        if self.cwd is not None:
            args += ["--chdir", str(self.cwd)]
        args.append("--clearenv")
        for name, value in self.env.items():
            args += ["--setenv", name, value]
        return args


def _system_mounts() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def _masked(hidden: Iterable[Path]) -> list[str]:
    """The hidden paths a system bind would show (the rest are not in the sandbox)."""
    roots = [Path(os.path.realpath(d)) for d in SYSTEM_DIRS if os.path.isdir(d)]
    found = []
    for path in hidden:
        real = Path(os.path.realpath(path))
        if real.is_dir() and any(real == r or r in real.parents for r in roots):
            found.append(str(real))
    return sorted(set(found))


class Session:
    """One long-lived `bwrap` and the namespaces of its PID 1, held open as fds."""

    def __init__(
        self, keeper: subprocess.Popen[bytes], pidfds: list[int], fds: dict[str, int]
    ) -> None:
        self.keeper = keeper
        self._pidfds = pidfds
        """PID 1, then its first child (the process that waits): once either is gone
        the sandbox is ending, and no command may enter it."""
        self._fds = fds

    @classmethod
    def start(
        cls,
        bwrap: str,
        layout: Layout,
        *,
        log: Path,
        identity: Mapping[str, Any],
        preexec: Callable[[], None],
    ) -> Session:
        """Starts the sandbox and waits until it is set up (blocking: run in a thread
        that lives as long as the sandbox, since `--die-with-parent` watches it)."""
        info_read, info_write = os.pipe()
        keeper: subprocess.Popen[bytes] | None = None
        try:
            with open(log, "wb") as errors:
                keeper = subprocess.Popen(
                    [
                        bwrap,
                        *layout.options(),
                        "--info-fd",
                        str(info_write),
                        "--",
                        "/bin/sh",
                        "-c",
                        "echo ready; exec sleep infinity",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    pass_fds=[info_write],
                    cwd="/",
                    env={"PATH": SAFE_PATH},
                    start_new_session=True,
                    preexec_fn=preexec,
                    **identity,
                )
            os.close(info_write)
            info_write = -1
            assert keeper.stdout is not None
            deadline = time.monotonic() + _START_TIMEOUT
            info = json.loads(_read_all(info_read, deadline) or b"{}")
            ready = _read_all(keeper.stdout.fileno(), deadline, until=_READY)
            keeper.stdout.close()
            if ready != _READY or "child-pid" not in info:
                raise SandboxError(_start_failure(log))
            return cls._attach(keeper, int(info["child-pid"]), info)
        except BaseException:
            if keeper is not None:
                keeper.kill()
                keeper.wait()
            raise
        finally:
            os.close(info_read)
            if info_write >= 0:
                os.close(info_write)

    @classmethod
    def _attach(cls, keeper: subprocess.Popen[bytes], pid: int, info: dict[str, Any]) -> Session:
        """Pins PID 1 with a pidfd, then opens its namespaces; the inodes bwrap reported
        prove the pid was not reused meanwhile."""
        pidfds = [os.pidfd_open(pid)]
        fds: dict[str, int] = {}
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            pidfds.append(os.pidfd_open(int(children[0])))
            for name in NAMESPACES:
                theirs = os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC)
                if os.fstat(theirs).st_ino == os.stat(f"/proc/self/ns/{name}").st_ino:
                    os.close(theirs)  # not unshared (a shared network, no cgroup ns)
                    continue
                fds[name] = theirs
                reported = info.get(f"{name}-namespace")
                if reported is not None and os.fstat(theirs).st_ino != reported:
                    raise SandboxError("the sandbox's PID 1 ended while it started; retry")
            if any(_exited(fd) for fd in pidfds):
                raise SandboxError("the sandbox's PID 1 ended while it started; retry")
        except (OSError, IndexError) as exc:
            for fd in [*pidfds, *fds.values()]:
                os.close(fd)
            raise SandboxError(f"the sandbox ended while it started ({exc}); retry") from exc
        except BaseException:
            for fd in [*pidfds, *fds.values()]:
                os.close(fd)
            raise
        return cls(keeper, pidfds, fds)

    @property
    def alive(self) -> bool:
        return bool(self._pidfds) and not any(_exited(fd) for fd in self._pidfds)

    @property
    def fds(self) -> list[int]:
        return list(self._fds.values())

    def enter(self, nsenter: str, env: str, cwd: Path, argv: Sequence[str]) -> list[str]:
        """The argv running `argv` inside the sandbox, in `cwd` (pass `fds` along).

        Entering the mount namespace puts the process at the sandbox's root; `env
        --chdir` then moves it (nsenter's own --wd would open the host's directory)."""
        flags = [f"--{_NSENTER_FLAG.get(n, n)}=/proc/self/fd/{fd}" for n, fd in self._fds.items()]
        entering = [nsenter, *flags, "--preserve-credentials", "--"]
        return [*entering, env, f"--chdir={cwd}", "--", *argv]

    def end(self, timeout: float = 10.0) -> bool:
        """SIGKILLs PID 1, so the kernel kills every process of the namespace; True once
        it is gone (blocking)."""
        if not self._pidfds:
            return True
        init = self._pidfds[0]
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(init, signal.SIGKILL)
        gone = bool(select.select([init], [], [], timeout)[0])
        # bwrap exits once it has reaped its PID 1; killed before that, it would leave
        # PID 1 a zombie for the host's init, which in a container may never reap it.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.keeper.wait(timeout if gone else 0.1)
        if self.keeper.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.keeper.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.keeper.wait(timeout)
        for fd in [*self._pidfds, *self._fds.values()]:
            os.close(fd)
        self._pidfds = []
        self._fds = {}
        return gone


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _read_all(fd: int, deadline: float, until: bytes | None = None) -> bytes:
    data = b""
    while until is None or not data.endswith(until):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def _start_failure(log: Path) -> str:
    try:
        said = log.read_text(errors="replace").strip()[-1500:]
    except OSError:
        said = ""
    return (
        f"bwrap could not start the sandbox ({said or 'no message'}). If it says "
        "'setting up uid map' or 'No permissions to create new namespace', unprivileged "
        "user namespaces are off: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian), "
        "or allow bwrap in AppArmor (Ubuntu 24.04: kernel.apparmor_restrict_"
        "unprivileged_userns=0); or pass sandbox='uid' (far weaker isolation)"
    )
