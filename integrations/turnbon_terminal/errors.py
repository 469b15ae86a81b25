"""The terminal environment's errors: each says what failed and what to do about it."""

from __future__ import annotations

from turnbon_graph.errors import ConfigurationError, TurnBoNError


class TerminalError(TurnBoNError):
    """Base class of every error the terminal environment raises on purpose."""


class TaskFormatError(TerminalError, ValueError):
    """A task folder does not follow the Terminal-Bench 2 layout closely enough to run."""


class DockerRequiredError(TaskFormatError):
    """A task whose environment cannot run here: a compose file (several services), or
    an image (a Dockerfile or `docker_image`) while the host sandbox was asked for."""


class SandboxError(TerminalError):
    """The sandbox could not be set up (an unsafe work root, no free user id, no bash)."""


class SetupScriptError(TerminalError):
    """A task's `environment/setup.sh` failed or timed out, so the episode cannot start."""


class SecretEnvironmentError(ConfigurationError):
    """A variable passed to the sandbox looks like a secret (an API key, a token...)."""
