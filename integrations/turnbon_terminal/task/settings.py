"""How every episode's commands run: `SandboxSettings`, shared by an environment's episodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from turnbon_graph.errors import ConfigurationError
from turnbon_terminal.host.users import UID_BASE, UID_COUNT
from turnbon_terminal.task.envvars import checked
from turnbon_terminal.task.limits import Limits, MiB

VERIFIER_MARGIN_S = 2.0
"""Our own verifier timeout ends this much before the runner's, so a slow verifier
comes back as a verdict rather than as the runner's timeout."""

SandboxKind = Literal["bwrap", "uid"]
SANDBOX_KINDS = ("bwrap", "uid")


@dataclass(frozen=True)
class SandboxSettings:
    """How every episode's commands run (shared by all episodes of an environment)."""

    command_timeout: float = 60.0
    output_limit: int = 8 * 1024
    """Bytes of output the agent sees: the first and last half, with a line about the cut."""
    hard_output_limit: int = 10 * MiB
    """Past this much output the command is killed (a `yes` flood)."""
    limits: Limits = field(default_factory=Limits)
    sandbox: SandboxKind = "bwrap"
    """"bwrap": every command in the episode's bubblewrap namespaces (the default, and
    required unless asked otherwise); "uid": the old fallback, a uid per episode on the
    host (as root) or nothing at all (as a user), loudly warned."""
    isolate_user: bool | None = None
    """A dedicated uid per episode; None: when running as root (it needs root). Under
    bwrap a root runner always uses one: False is only for sandbox="uid"."""
    work_root: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra variables for every command; secret-looking names are refused."""
    hidden: tuple[Path, ...] = ()
    """Folders the sandbox must never show (task folders, with their tests and
    solutions), masked where a system directory it binds would show them."""
    uid_base: int = UID_BASE
    uid_count: int = UID_COUNT
    enforce_budgets: bool = True
    """Bound each episode's memory, processes and CPUs with a control group and its
    storage with a file system of its own, where the machine allows (warned once where
    not). False: rlimits only, as before budgets existed."""
    background_grace: float = 0.25
    """After the command exits, how long to wait for output still in flight; if the pipe
    is still held then (background processes), the result is returned anyway."""

    def __post_init__(self) -> None:
        checked(self.env, origin="SandboxSettings.env")
        if self.command_timeout <= 0 or self.output_limit < 64 or self.hard_output_limit < 1:
            raise ConfigurationError(
                "command_timeout must be > 0, output_limit >= 64 and hard_output_limit >= 1; "
                f"got {self.command_timeout}, {self.output_limit}, {self.hard_output_limit}"
            )
        if self.sandbox not in SANDBOX_KINDS:
            raise ConfigurationError(
                f"sandbox must be 'bwrap' (the default) or 'uid' (the weak fallback), "
                f"got {self.sandbox!r}"
            )


def verifier_limit(timeout_s: float) -> float:
    """The verifier's own time limit within the task's `[verifier] timeout_sec`."""
    return max(timeout_s - min(VERIFIER_MARGIN_S, timeout_s / 10), 0.5)


@dataclass(frozen=True)
class Fresh:
    """Run a command in a sandbox of its own (not the episode's): its workdir, these
    read-only paths, these writable ones, an empty /tmp, and no process of the episode
    (the verifier)."""

    readonly: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    """Host folders of ours bound read-write (the verifier's report folder)."""
    fds: tuple[int, ...] = ()
    """Descriptors of ours the command inherits (the verifier's evidence pipe)."""
