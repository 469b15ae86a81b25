"""A control group per episode: its memory, process count and CPU share, enforced by
the kernel for every process of the episode (the sandbox, each command, the verifier).

Where the machine offers one: cgroup v2 where the memory and pids controllers are
delegated to this process's cgroup (or can be enabled below it), else cgroup v1's
`memory`, `pids` and `cpu` hierarchies when they are writable (as root). Elsewhere
`CgroupSupport.detect` says why not, and the sandbox says so once, loudly.

A process joins its episode's groups itself, before it execs (`Limits.preexec`), by
writing "0" to `cgroup.procs` files this process opened: the kernel checks a move
against the opener's credentials (Linux 5.16+), so a child that already dropped to the
episode's uid can still join, and nothing it forks escapes the group.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from turnbon_terminal.task.budget import ResourceBudget

CgroupVersion = Literal["v1", "v2"]
V1_CONTROLLERS = ("memory", "pids", "cpu")
V2_CONTROLLERS = ("memory", "pids")
"""The controllers a v2 episode group needs (`cpu` is used when it is there too)."""
PARENT_NAME = "turnbon-terminal"
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupSupport:
    """Where episode groups are made: one parent folder per hierarchy, or the reason
    there is none (`reason`)."""

    version: CgroupVersion | None
    parents: tuple[Path, ...] = ()
    """v2: one folder; v1: one per controller of `V1_CONTROLLERS`, in that order."""
    reason: str = ""
    cpu: bool = True
    """Whether the CPU share can be bounded too (v2 without the cpu controller: not)."""

    @classmethod
    def detect(cls) -> CgroupSupport:
        """Probes this process's own groups (blocking: a few small /proc and /sys reads)."""
        try:
            mounts = _cgroup_mounts()
            own = _own_groups()
        except OSError as exc:
            return cls(None, reason=f"cannot read this process's cgroups ({exc})")
        v2 = _detect_v2(mounts, own)
        if v2.version is not None:
            return v2
        v1 = _detect_v1(mounts, own)
        if v1.version is not None:
            return v1
        return cls(None, reason=f"{v2.reason}; {v1.reason}")

    def create(self, episode: Path, budget: ResourceBudget, processes: int) -> EpisodeCgroup | None:
        """A new group for the episode whose directory is `episode`, with its limits
        set; None without support (blocking)."""
        if self.version is None:
            return None
        name = group_name(episode)
        folders = [parent / name for parent in self.parents]
        made: list[Path] = []
        try:
            for folder in folders:
                folder.mkdir(mode=0o755)
                made.append(folder)
            group = EpisodeCgroup(self.version, tuple(folders))
            group.apply(budget, processes, cpu=self.cpu)
        except BaseException:
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        return group


@dataclass(frozen=True)
class EpisodeCgroup:
    """One episode's group (one folder per v1 hierarchy, or one v2 folder)."""

    version: CgroupVersion
    folders: tuple[Path, ...]

    @property
    def _memory(self) -> Path:
        return self.folders[0]

    def apply(self, budget: ResourceBudget, processes: int, *, cpu: bool) -> None:
        memory = budget.memory_mb * (1 << 20)
        quota = int(budget.cpus * CPU_PERIOD_US)
        if self.version == "v2":
            folder = self.folders[0]
            _write(folder / "memory.max", str(memory))
            if (folder / "memory.swap.max").exists():
                _write(folder / "memory.swap.max", "0")
            _write(folder / "pids.max", str(processes))
            if cpu:
                _write(folder / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            return
        memory_dir, pids_dir, cpu_dir = self.folders
        _write(memory_dir / "memory.limit_in_bytes", str(memory))
        if (memory_dir / "memory.memsw.limit_in_bytes").exists():  # no swap to spill into
            _write(memory_dir / "memory.memsw.limit_in_bytes", str(memory))
        _write(pids_dir / "pids.max", str(processes))
        _write(cpu_dir / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        _write(cpu_dir / "cpu.cfs_quota_us", str(quota))

    def open_joins(self) -> list[int]:
        """Fds of the groups' `cgroup.procs`, for a child to join by writing "0" (close
        them with `os.close`)."""
        fds: list[int] = []
        try:
            for folder in self.folders:
                fds.append(os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def oom_kills(self) -> int:
        """How many of the episode's processes the kernel killed for its memory limit."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            text = (self._memory / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def processes(self) -> list[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return sorted(found)

    def remove(self) -> bool:
        """Removes the groups (their processes must be gone); True when all went."""
        gone = True
        for folder in self.folders:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone


def group_name(episode: Path) -> str:
    """The group's name for an episode directory, the same wherever it is computed (a
    later run clears a crashed one's groups by it)."""
    return "episode-" + hashlib.sha256(os.fsencode(episode)).hexdigest()[:20]


def remove_leftover_groups(episode: Path, support: CgroupSupport) -> None:
    """Removes the groups a crashed run left for `episode` (empty by now: its processes
    were killed with its uid)."""
    for parent in support.parents:
        with contextlib.suppress(OSError):
            (parent / group_name(episode)).rmdir()


def _enable(group: Path, controllers: list[str]) -> None:
    enabled = set((group / "cgroup.subtree_control").read_text().split())
    if not set(controllers) <= enabled:
        _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in controllers))


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _cgroup_mounts() -> list[tuple[str, Path, set[str]]]:
    """(fstype, mount point, super options) of every cgroup mount."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((tail[0], Path(fields[4]), set(tail[2].split(","))))
    return found


def _own_groups() -> dict[str, str]:
    """This process's group per v1 controller, and "" for the v2 one."""
    groups: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            groups[name] = path
    return groups


def _detect_v2(mounts: list[tuple[str, Path, set[str]]], own: dict[str, str]) -> CgroupSupport:
    root = next((point for kind, point, _ in mounts if kind == "cgroup2"), None)
    if root is None or "" not in own:
        return CgroupSupport(None, reason="no cgroup v2 hierarchy")
    here = root / own[""].lstrip("/")
    try:
        available = set((here / "cgroup.controllers").read_text().split())
    except OSError as exc:
        return CgroupSupport(None, reason=f"cgroup v2 at {here} unreadable ({exc})")
    missing = [c for c in V2_CONTROLLERS if c not in available]
    if missing:
        return CgroupSupport(
            None, reason=f"cgroup v2 at {here} lacks the {', '.join(missing)} controller(s)"
        )
    # A v2 controller reaches a group only through its parent's subtree_control, and a
    # group with processes of its own (this one) may not pass any on, except where
    # they are passed on already (a delegated group): then our parent folder passes
    # them on again to the episodes' groups.
    wanted = [c for c in (*V2_CONTROLLERS, "cpu") if c in available]
    parent = here / PARENT_NAME
    try:
        _enable(here, wanted)
        parent.mkdir(mode=0o755, exist_ok=True)
        _enable(parent, wanted)
    except OSError as exc:
        return CgroupSupport(
            None,
            reason=f"cgroup v2 controllers are not delegated below {here} "
            f"({exc.strerror or exc}); start the run in a delegated group, e.g. with "
            "`systemd-run --user --scope -p Delegate=yes ...`",
        )
    return CgroupSupport("v2", (parent,), cpu="cpu" in available)


def _detect_v1(mounts: list[tuple[str, Path, set[str]]], own: dict[str, str]) -> CgroupSupport:
    parents = []
    for controller in V1_CONTROLLERS:
        point = next(
            (p for kind, p, options in mounts if kind == "cgroup" and controller in options),
            None,
        )
        if point is None or controller not in own:
            return CgroupSupport(None, reason=f"no cgroup v1 {controller} hierarchy")
        parent = point / own[controller].lstrip("/") / PARENT_NAME
        try:
            parent.mkdir(mode=0o755, exist_ok=True)
            if not os.access(parent, os.W_OK):
                raise PermissionError(f"{parent} is not writable")
        except OSError as exc:
            return CgroupSupport(
                None, reason=f"cgroup v1 {controller} is not writable ({exc.strerror or exc})"
            )
        parents.append(parent)
    return CgroupSupport("v1", tuple(parents))
