"""turnbon-terminal: terminal tasks (Terminal-Bench 2 layout) in a sandbox, for turnbon-graph.

`TerminalEnvironment` implements `turnbon_graph.bench.environment.Environment`: each episode
gets a fresh working directory in a bubblewrap sandbox of its own (and a uid of its own
when run as root), a `shell` tool and a pytest verifier run in a fresh sandbox, within
the budget its task declares (`ResourceBudget`: memory, storage, CPUs). A task with an
image (a Dockerfile or `docker_image`, Terminal-Bench 2's) runs in a container of it
instead (`ContainerEpisode`, Podman or Docker), judged by the reward its `tests/test.sh`
writes.
`load_tasks` reads task folders; the shipped suite is the default. `stub_policy` scripts
the loopback stub server to play an oracle-ish model.
"""

from __future__ import annotations

from turnbon_graph._exports import install_moved_modules
from turnbon_terminal._moved import MOVED
from turnbon_terminal.container.engine import ContainerError
from turnbon_terminal.container.episode import ContainerEpisode
from turnbon_terminal.container.instance import DEFAULT_IMAGE
from turnbon_terminal.environment import TerminalEnvironment, environment
from turnbon_terminal.errors import (
    DockerRequiredError,
    SandboxError,
    SecretEnvironmentError,
    SetupScriptError,
    TaskFormatError,
    TerminalError,
)
from turnbon_terminal.host.episode import TerminalEpisode
from turnbon_terminal.host.sandbox import CommandResult, Sandbox, SandboxSettings
from turnbon_terminal.shell_tool import ShellTool
from turnbon_terminal.stub_policy import StubPolicy, stub_policy
from turnbon_terminal.task.budget import ResourceBudget
from turnbon_terminal.task.enforcement import BudgetNotEnforcedWarning
from turnbon_terminal.task.folders import (
    SHIPPED_TASKS,
    DockerTaskSkipped,
    TerminalTask,
    load_task,
    load_tasks,
)
from turnbon_terminal.task.limits import Limits
from turnbon_terminal.task.tb2 import ContainerSpec, NetworkModeWarning

__all__ = [
    "DEFAULT_IMAGE",
    "SHIPPED_TASKS",
    "BudgetNotEnforcedWarning",
    "CommandResult",
    "ContainerEpisode",
    "ContainerError",
    "ContainerSpec",
    "DockerRequiredError",
    "DockerTaskSkipped",
    "Limits",
    "NetworkModeWarning",
    "ResourceBudget",
    "Sandbox",
    "SandboxError",
    "SandboxSettings",
    "SecretEnvironmentError",
    "SetupScriptError",
    "ShellTool",
    "StubPolicy",
    "TaskFormatError",
    "TerminalEnvironment",
    "TerminalEpisode",
    "TerminalError",
    "TerminalTask",
    "environment",
    "load_task",
    "load_tasks",
    "stub_policy",
]

install_moved_modules(MOVED)
