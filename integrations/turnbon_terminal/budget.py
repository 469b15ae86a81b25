"""What one episode may use in all: memory, disk and CPUs, from its task's `task.toml`.

    [environment]
    memory_mb = 2048      # every process of the episode together (page cache included)
    storage_mb = 10240    # everything it can write: work folder, /tmp, /var/tmp
    cpus = 1              # CPU time share (may be fractional)

The keys and defaults are Terminal-Bench 2's (Harbor's documented task defaults). An
episode that goes over its memory or storage ends with the outcome `resource_limit`;
CPUs are a ceiling the kernel throttles to, never an ending.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnbon_graph.errors import ConfigurationError

DEFAULT_MEMORY_MB = 2048
DEFAULT_STORAGE_MB = 10240
DEFAULT_CPUS = 1.0
MIN_MEMORY_MB = 64
MIN_STORAGE_MB = 16
"""Below these a sandbox cannot start (bash, the file system's own metadata)."""


@dataclass(frozen=True)
class ResourceBudget:
    """One episode's budget (see the module)."""

    memory_mb: int = DEFAULT_MEMORY_MB
    storage_mb: int = DEFAULT_STORAGE_MB
    cpus: float = DEFAULT_CPUS

    def __post_init__(self) -> None:
        if self.memory_mb < MIN_MEMORY_MB or self.storage_mb < MIN_STORAGE_MB:
            raise ConfigurationError(
                f"an episode needs memory_mb >= {MIN_MEMORY_MB} and storage_mb >= "
                f"{MIN_STORAGE_MB}, got {self.memory_mb} and {self.storage_mb}"
            )
        if not self.cpus > 0:
            raise ConfigurationError(f"cpus must be positive, got {self.cpus}")

    def describe(self) -> str:
        return f"{self.memory_mb} MB of memory, {self.storage_mb} MB of storage, {self.cpus:g} CPU"
