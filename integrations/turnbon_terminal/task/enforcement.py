"""What of an episode's `ResourceBudget` this machine enforces, found out once, said once.

Memory, process count and CPUs take a control group (`turnbon_terminal.host.cgroups`);
storage takes a file system per episode (`turnbon_terminal.host.disk`). Each is probed on
the first episode (in its thread, never on the event loop); what cannot be enforced is
warned about once per environment, with the reason and what still holds.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from turnbon_terminal.host.cgroups import CgroupSupport, EpisodeCgroup, remove_leftover_groups
from turnbon_terminal.host.disk import DiskSupport, EpisodeDisk, unmount_below
from turnbon_terminal.task.budget import ResourceBudget
from turnbon_terminal.task.limits import Limits, MiB

_GROUP_GONE_S = 5.0


class BudgetNotEnforcedWarning(UserWarning):
    """Part of the episodes' budget cannot be enforced on this machine."""


@dataclass
class EpisodeResources:
    """One episode's file system and control group, and how to tell it went over."""

    budget: ResourceBudget
    disk: EpisodeDisk
    cgroup: EpisodeCgroup | None

    @property
    def root(self) -> Path:
        """The folder holding the episode's writable folders."""
        return self.disk.root

    def breach(self) -> str | None:
        """What the episode went over, in words, or None (blocking: small reads)."""
        if self.cgroup is not None and self.cgroup.oom_kills() > 0:
            return (
                f"memory: its processes needed more than memory_mb = {self.budget.memory_mb}, "
                "so the kernel killed one"
            )
        if self.disk.full():
            return f"storage: its files filled storage_mb = {self.budget.storage_mb}"
        return None

    def release(self) -> None:
        """Frees the file system and removes the group (its processes must be gone;
        blocking, idempotent)."""
        self.disk.release()
        if self.cgroup is not None:
            deadline = time.monotonic() + _GROUP_GONE_S
            while not self.cgroup.remove() and time.monotonic() < deadline:
                time.sleep(0.01)  # the last processes are still leaving the group


class Enforcement:
    """Makes each episode's resources with what the machine supports (see the module)."""

    def __init__(self, work_root: Path, limits: Limits, *, enabled: bool = True) -> None:
        self.work_root = work_root
        self.limits = limits
        self.enabled = enabled
        self._lock = threading.Lock()
        self._found: tuple[CgroupSupport, DiskSupport] | None = None

    def support(self) -> tuple[CgroupSupport, DiskSupport]:
        """(control groups, file systems), probed on the first call (blocking)."""
        with self._lock:
            if self._found is None:
                if self.enabled:
                    self._found = (CgroupSupport.detect(), DiskSupport.detect(self.work_root))
                else:
                    off = "budgets are off (enforce_budgets=False)"
                    self._found = (CgroupSupport(None, reason=off), DiskSupport(None, off))
                self._warn(*self._found)
            return self._found

    def make(self, episode: Path, budget: ResourceBudget) -> EpisodeResources:
        """The episode's file system and control group (blocking)."""
        cgroups, disks = self.support()
        disk = EpisodeDisk.make(episode, budget.storage_mb, disks)
        try:
            group = cgroups.create(episode, budget, self.limits.processes)
        except BaseException:
            disk.release()
            raise
        return EpisodeResources(budget, disk, group)

    def clear_leftovers(self, episode: Path) -> None:
        """What a crashed run left for `episode`: its mounts and groups (blocking)."""
        unmount_below(episode)
        with contextlib.suppress(OSError):
            remove_leftover_groups(episode, self.support()[0])

    def _warn(self, cgroups: CgroupSupport, disks: DiskSupport) -> None:
        if not self.enabled:
            return
        problems = []
        if cgroups.version is None:
            problems.append(
                f"memory_mb, cpus and the process count per episode are NOT enforced "
                f"({cgroups.reason}); each process is still bounded by rlimits "
                f"({self.limits.memory_bytes // MiB} MiB of address space, "
                f"{self.limits.processes} processes per user namespace)"
            )
        if disks.tools is None:
            problems.append(
                f"storage_mb is NOT enforced ({disks.reason}); each file is still bounded "
                f"by RLIMIT_FSIZE ({self.limits.file_bytes // MiB} MiB)"
            )
        for problem in problems:
            message = f"turnbon_terminal: {problem}"
            warnings.warn(message, BudgetNotEnforcedWarning, stacklevel=2)
