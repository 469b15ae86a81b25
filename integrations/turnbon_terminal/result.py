"""What one command did, and the text the agent reads about it."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from turnbon_terminal.task.limits import MiB


@dataclass
class CommandResult:
    """What one command did; `render()` is what the agent reads."""

    output: str
    exit_code: int
    """The process's return code: negative when a signal ended it."""
    timeout: float
    timed_out: bool = False
    flooded: bool = False
    background: bool = False
    """Processes the command started still held its output when it returned."""
    total_bytes: int = 0
    hard_limit: int = 0
    duration_s: float = 0.0
    over_budget: str | None = None
    """Set when, after this command, the episode was over its budget: it ends here."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.flooded)

    def render(self) -> str:
        lines = [self.output.rstrip("\n") if self.output else "(no output)"]
        if self.timed_out:
            lines.append(f"[timed out after {self.timeout:g} s: the command was killed]")
        if self.flooded:
            lines.append(f"[more than {_size(self.hard_limit)} of output: the command was killed]")
        if self.background:
            lines.append(
                "[processes the command started in the background still run and hold its "
                "output; their further output is discarded]"
            )
        if self.exit_code >= 0:
            lines.append(f"[exit code {self.exit_code}]")
        else:
            name = signal_name(-self.exit_code)
            lines.append(f"[exit code {128 - self.exit_code} (killed by {name})]")
        if self.over_budget:
            lines.append(f"[the episode went over its budget ({self.over_budget}): it ends here]")
        return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n} bytes"


def signal_name(number: int) -> str:
    """A signal's name (`SIGKILL`), or `signal <number>` for one Python does not know."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
