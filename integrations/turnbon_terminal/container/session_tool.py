"""The agent's `shell` tool on a container's shell session
(`turnbon_terminal.container.session`): `shell(command, keys)`."""

from __future__ import annotations

from typing import Any

from langchain_core.tools.base import ArgsSchema
from pydantic import BaseModel, Field

from turnbon_terminal.container.session import HEIGHT, WIDTH, Session
from turnbon_terminal.shell_tool import ShellTool


class SessionArgs(BaseModel):
    """The session's `shell` tool's arguments."""

    command: str = Field(
        default="",
        description="Bash commands (one line or several) run in the shell; while a "
        "command is still running, a line of input typed into it.",
    )
    keys: str = Field(
        default="",
        description="Keys sent first, as tmux key names separated by spaces: C-c "
        "(interrupt), C-d, C-z, Enter, Escape, Tab, Up, Down, ...",
    )


class SessionShellTool(ShellTool):
    """Runs commands in the episode's shell session and reports their output, or the
    screen while one still runs. The command's own failures are part of the result."""

    args_schema: ArgsSchema | None = SessionArgs
    session: Session = Field(exclude=True)

    def __init__(self, session: Session, **kwargs: Any) -> None:
        timeout = session.container.settings.command_timeout
        super().__init__(session.container, session=session, **kwargs)
        self.description = (
            "Run bash commands in the task's shell: one bash session in a terminal "
            f"({WIDTH}x{HEIGHT}, tmux) kept for the whole task, started in its working "
            "directory. `cd`, variables, functions, background jobs and running programs "
            "carry over from call to call. Returns the output (stdout and stderr; long "
            "output is cut in the middle) and exit code. A command still running after "
            f"{timeout:g} s is left running and the screen is returned: then the next "
            "call's `command` is typed into it as a line of input, `keys` are sent "
            'before it (`keys="C-c"` interrupts it), and a call with neither waits '
            f"{timeout:g} s more. After `exit`, the next call starts a new shell in the "
            "last directory with the exported variables."
        )

    async def _arun(self, command: str = "", keys: str = "", **_: Any) -> str:
        reply = await self.session.send(command, keys.split())
        return reply.render()
