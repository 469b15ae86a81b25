"""The agent's shell session in a container (`turnbon_terminal.container.session`), under
real Podman: what carries over from call to call, a command past its limit, keys, an
interactive program, the shell's exit, forks, and images without tmux."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.container_tasks import BASE_IMAGE, HELLO, needs_podman, tb2_task
from tests.helpers import stub_engine
from turnbon_graph.bench.episode import run_agent
from turnbon_graph.testing import StubServer
from turnbon_graph.testing.replies import chat_completion, tool_call
from turnbon_terminal import TerminalEnvironment
from turnbon_terminal.container.episode import ContainerEpisode
from turnbon_terminal.container.session_tool import SessionShellTool
from turnbon_terminal.shell_tool import ShellTool

pytestmark = needs_podman


@contextlib.asynccontextmanager
async def _started(folder: Path = HELLO, **options: Any) -> AsyncIterator[ContainerEpisode]:
    env = TerminalEnvironment(folder, **options)
    episode = await env.start(env.tasks()[0], 0)
    assert isinstance(episode, ContainerEpisode)
    try:
        yield episode
    finally:
        await episode.close()


async def _shell(episode: ContainerEpisode, command: str = "", keys: str = "") -> str:
    said = await episode.tools[0].ainvoke({"command": command, "keys": keys})
    assert isinstance(said, str)
    return said


def test_a_scripted_agents_cd_is_still_in_effect_at_its_next_turn() -> None:
    env = TerminalEnvironment(HELLO)
    spec = env.tasks()[0]
    assert "one bash session in a terminal" in spec.instruction
    assert "Nothing persists between calls" not in spec.instruction

    async def scenario() -> list[str]:
        with StubServer() as stub:
            stub.script(
                chat_completion(None, [tool_call("shell", {"command": "mkdir /tmp/x; cd /tmp/x"})]),
                chat_completion(None, [tool_call("shell", {"command": "pwd"})]),
                chat_completion("done"),
            )
            end = await run_agent(env, stub_engine(stub, n=1), spec, 0, verify=False)
            assert end.error is None
            messages = stub.requests[-1].body["messages"]
        return [m["content"] for m in messages if m.get("role") == "tool"]

    assert asyncio.run(scenario()) == ["(no output)\n[exit code 0]", "/tmp/x\n[exit code 0]"]


async def test_variables_functions_and_background_jobs_carry_over() -> None:
    async with _started() as episode:
        assert isinstance(episode.tools[0], SessionShellTool)
        assert "carry over from call to call" in episode.tools[0].description
        await _shell(episode, "export A=1; B=2; f() { echo f$1; }; sleep 300 &")
        said = await _shell(episode, "echo $A $B; f 3; jobs; kill %1")
        assert said.splitlines()[:3] == ["1 2", "f3", "[1]+  Running                 sleep 300 &"]
        assert said.endswith("[exit code 0]")


async def test_a_command_past_its_limit_keeps_running_and_the_session_stays_usable() -> None:
    async with _started(command_timeout=2) as episode:
        slow = await _shell(episode, "cd /tmp; echo started; sleep 1000")
        assert "started" in slow and "the command is still running" in slow
        assert "[exit code" not in slow
        stopped = await _shell(episode, keys="C-c")
        assert "^C" in stopped and stopped.endswith("[exit code 130]")
        assert await _shell(episode, "echo ok; pwd") == "ok\n/tmp\n[exit code 0]"


async def test_an_interactive_program_reads_the_lines_typed_into_it() -> None:
    async with _started(command_timeout=2) as episode:
        started = await _shell(episode, "python3 -q")
        assert ">>>" in started and "still running" in started
        answered = await _shell(episode, "print(6 * 7)")
        assert ">>> print(6 * 7)\n42\n>>>" in answered and "still running" in answered
        ended = await _shell(episode, "exit()")
        assert ended.endswith("[exit code 0]")
        assert await _shell(episode, "echo back") == "back\n[exit code 0]"


async def test_after_exit_a_new_shell_starts_where_the_last_command_left() -> None:
    async with _started() as episode:
        await _shell(episode, "cd /tmp && export B=2")
        gone = await _shell(episode, "exit 3")
        assert "exit 3\n" in gone and "[the shell exited" in gone
        assert await _shell(episode, "pwd; echo $B") == "/tmp\n2\n[exit code 0]"


async def test_a_fork_starts_in_its_parents_directory_with_its_variables() -> None:
    async with _started() as episode:
        await _shell(episode, "mkdir -p /tmp/x && cd /tmp/x && export A=parent && B=local")
        fork = await episode.fork()
        try:
            said = await _shell(fork, 'pwd; echo "$A" "${B-unset}"; cd /; export A=child')
            assert said == "/tmp/x\nparent unset\n[exit code 0]"
            assert await _shell(episode, 'pwd; echo "$A"') == "/tmp/x\nparent\n[exit code 0]"
        finally:
            await fork.close()


async def test_an_image_without_tmux_runs_each_command_in_a_fresh_shell(tmp_path: Path) -> None:
    folder = tb2_task(tmp_path, "no-tmux")
    dockerfile = f"FROM {BASE_IMAGE}\nWORKDIR /app\nRUN rm /usr/bin/tmux\n"
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    async with _started(folder) as episode:
        assert episode.session is None
        tool = episode.tools[0]
        assert type(tool) is ShellTool and "This image has no tmux" in tool.description
        await _shell(episode, "cd /tmp")
        assert await _shell(episode, "pwd") == "/app\n[exit code 0]"


async def test_shell_fresh_keeps_a_fresh_bash_per_command() -> None:
    async with _started(shell="fresh") as episode:
        assert episode.session is None and type(episode.tools[0]) is ShellTool
        assert "Nothing persists between calls" in episode.task.spec.instruction
        await _shell(episode, "cd /tmp")
        assert await _shell(episode, "pwd") == "/app\n[exit code 0]"
