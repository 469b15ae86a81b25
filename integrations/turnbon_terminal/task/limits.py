"""Resource limits applied to every sandboxed process (in `preexec_fn`, after the uid drop)."""

from __future__ import annotations

import ctypes
import os
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Per-process limits (RLIMIT_*), except `processes`, which Linux counts per user.

    `processes` (RLIMIT_NPROC) is what stops a fork bomb; it only holds for a non-root
    user, and it counts every process of that user: with a dedicated uid per episode,
    the episode's own processes (background ones and the verifier included)."""

    processes: int = 256
    """Processes of one episode. Under bwrap Linux counts them per user namespace, so
    this holds for the episode alone whoever runs it; in the uid fallback it needs root."""
    cpu_seconds: int = 900
    """CPU time of one process; a busy loop left in the background dies here at the latest."""
    file_bytes: int = 1 * GiB
    """Largest file a process may write (RLIMIT_FSIZE): a flood to disk stops there."""
    memory_bytes: int = 8 * GiB
    """Address space of one process (RLIMIT_AS): generous, so runtimes that reserve
    virtual memory still start."""
    open_files: int = 4096
    """Files one process may hold open (RLIMIT_NOFILE)."""
    tmpfs_bytes: int = 1 * GiB
    """Size of each of the bwrap sandbox's own /tmp, /var/tmp and /dev/shm."""

    def preexec(self, *, limit_processes: bool, joins: Sequence[int] = ()) -> Callable[[], None]:
        """A `preexec_fn` setting these limits, never above the parent's hard limits,
        and joining the episode's control groups (`joins`: their `cgroup.procs` fds,
        see `turnbon_terminal.host.cgroups`).

        Everything is computed here, in the parent: the child (forked from a threaded
        process) only makes the system calls.

        Args:
            limit_processes: set `processes` too (it holds only for a non-root user, or
                per user namespace under bwrap).
            joins: the episode's control groups' `cgroup.procs` file descriptors, which
                the child writes itself into.

        Returns:
            The function to pass as `subprocess.Popen(preexec_fn=...)`.
        """
        wanted = [
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_FSIZE, self.file_bytes),
            (resource.RLIMIT_AS, self.memory_bytes),
            (resource.RLIMIT_NOFILE, self.open_files),
            (resource.RLIMIT_CORE, 0),
        ]
        if limit_processes:
            wanted.append((resource.RLIMIT_NPROC, self.processes))
        settings = [(kind, _capped(kind, value)) for kind, value in wanted]
        prctl = ctypes.CDLL(None, use_errno=True).prctl

        joined = tuple(joins)

        def apply() -> None:
            for fd in joined:
                os.write(fd, b"0")  # "0": this process, before anything it forks
            for kind, value in settings:
                resource.setrlimit(kind, (value, value))
            prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # no setuid binary can raise it

        return apply


_PR_SET_NO_NEW_PRIVS = 38


def _capped(kind: int, value: int) -> int:
    _, hard = resource.getrlimit(kind)
    return value if hard == resource.RLIM_INFINITY else min(value, hard)
