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
    """One episode's budget (see the module).

    Raises:
        ConfigurationError: `memory_mb` is under 64, `storage_mb` under 16, or `cpus`
            not positive.
    """

    memory_mb: int = DEFAULT_MEMORY_MB
    """Megabytes of memory for every process of the episode together, page cache
    included."""
    storage_mb: int = DEFAULT_STORAGE_MB
    """Megabytes of everything the episode can write: work folder, /tmp, /var/tmp."""
    cpus: float = DEFAULT_CPUS
    """CPU time share (may be fractional): a ceiling the kernel throttles to."""

    def __post_init__(self) -> None:
        if self.memory_mb < MIN_MEMORY_MB or self.storage_mb < MIN_STORAGE_MB:
            raise ConfigurationError(
                f"an episode needs memory_mb >= {MIN_MEMORY_MB} and storage_mb >= "
                f"{MIN_STORAGE_MB}, got {self.memory_mb} and {self.storage_mb}"
            )
        if not self.cpus > 0:
            raise ConfigurationError(f"cpus must be positive, got {self.cpus}")

    def describe(self) -> str:
        """The budget in words, for messages and reports.

        Returns:
            `"<memory> MB of memory, <storage> MB of storage, <cpus> CPU"`.
        """
        return f"{self.memory_mb} MB of memory, {self.storage_mb} MB of storage, {self.cpus:g} CPU"
