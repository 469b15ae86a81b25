"""The agent's one tool: `shell(command)`, run with `bash -c` in the episode's sandbox
(the host sandbox's, or the episode's container when it keeps no shell session:
`turnbon_terminal.container.session_tool` is the tool of one that does)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from langchain_core.tools import BaseTool
from langchain_core.tools.base import ArgsSchema
from pydantic import BaseModel, Field

from turnbon_terminal.result import CommandResult
from turnbon_terminal.task.settings import SandboxSettings


@runtime_checkable
class CommandRunner(Protocol):
    """Where an episode's commands run: a `Sandbox` or a `Container`."""

    settings: SandboxSettings

    async def run(self, command: str) -> CommandResult: ...


class ShellArgs(BaseModel):
    """The `shell` tool's one argument: the command line."""

    command: str = Field(description="A bash command line, run with `bash -c` in the workdir.")


class ShellTool(BaseTool):
    """Runs one command in the episode's working directory and reports its output.

    The command's own failures (non-zero exit, timeout, flood) are part of the result
    the agent reads, never exceptions."""

    name: str = "shell"
    description: str = ""
    args_schema: ArgsSchema | None = ShellArgs
    sandbox: CommandRunner = Field(exclude=True)

    def __init__(self, sandbox: CommandRunner, *, note: str = "", **kwargs: Any) -> None:
        timeout = sandbox.settings.command_timeout
        description = (
            "Run a shell command with `bash -c` in the task's working directory and return "
            "its output (stdout and stderr interleaved; long output is cut in the middle) "
            "and exit code. Each call is a fresh shell: `cd`, variables and functions do "
            f"not carry over, only files do. No stdin. A command is killed after "
            f"{timeout:g} s; processes left in the background run until the task ends."
            + (f" {note}" if note else "")
        )
        super().__init__(sandbox=sandbox, description=description, **kwargs)

    async def _arun(self, command: str, **_: Any) -> str:
        result = await self.sandbox.run(command)
        return result.render()

    def _run(self, command: str = "", **kwargs: Any) -> str:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun(command, **kwargs))
        # Called synchronously from inside an event loop: run on a loop of its own.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self._arun(command, **kwargs)).result()
