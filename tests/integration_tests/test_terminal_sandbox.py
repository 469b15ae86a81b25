"""The terminal sandbox with real processes: users, secrets, hangs, bombs, floods, leftovers.

Run as root, each episode runs as a uid of its own; the tests that depend on that are
skipped otherwise."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from turnbon_terminal import Limits, Sandbox, SandboxSettings, ShellTool
from turnbon_terminal.limits import MiB
from turnbon_terminal.sandbox import SandboxHost
from turnbon_terminal.users import processes_of

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="a uid per episode needs root")
SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai-4f2a9c",
    "ANTHROPIC_API_KEY": "sk-ant-test-77d1e0",
    "AWS_SECRET_ACCESS_KEY": "aws-test-secret-91b3",
    "GITHUB_TOKEN": "ghp_test_token_5c8e",
    "MY_SERVICE_SECRET": "plain-secret-value-0a1b",
}


@asynccontextmanager
async def sandbox(**settings: Any) -> AsyncIterator[Sandbox]:
    box = SandboxHost(SandboxSettings(**settings)).create("test")
    try:
        yield box
    finally:
        await box.close()


async def _ends(condition: Callable[[], bool], within: float = 3.0) -> bool:
    """Polls `condition` until it holds or `within` seconds pass (killed processes take
    a moment to go: there is no event to wait for)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def gone(uid: int | None) -> bool:
    """True once no live process of `uid` is left."""
    assert uid is not None
    return await _ends(lambda: not processes_of(uid))


@needs_root
async def test_commands_run_as_the_episodes_own_user_in_its_directory() -> None:
    async with sandbox() as box:
        result = await box.run('id -u; pwd; echo "$HOME"; stat -c %a .; ls /root')
        uid, cwd, home, mode, *rest = result.output.splitlines()
        assert int(uid) == box.uid and box.uid is not None and box.uid >= 1_000_000
        assert cwd == home == str(box.workdir)
        assert mode == "700"
        assert "Permission denied" in rest[0]
        assert result.exit_code == 2


@needs_root
async def test_secrets_of_the_parent_never_reach_a_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    async with sandbox() as box:
        commands = [
            "env",
            "printenv",
            "cat /proc/self/environ",
            "cat /proc/$PPID/environ",  # the bash's parent: this test process
            f"cat /proc/{os.getpid()}/environ",
            "cat /proc/1/environ",
            "for f in /proc/[0-9]*/environ; do cat $f; done 2>/dev/null | tr '\\0' '\\n'",
        ]
        outputs = [(await box.run(c)).output for c in commands]
    for command, output in zip(commands, outputs, strict=True):
        for value in SECRETS.values():
            assert value not in output, f"{command} showed a secret"
    assert "PATH=" in outputs[0] and "TASK_WORKDIR=" in outputs[1]
    assert "Permission denied" in outputs[3] and "Permission denied" in outputs[4]


@needs_root
async def test_episodes_cannot_see_each_others_files() -> None:
    async with sandbox() as first, sandbox() as second:
        assert first.uid != second.uid
        await first.run("echo private > note.txt; echo private > $TMPDIR/t.txt")
        for target in [first.workdir / "note.txt", first.tmpdir / "t.txt", first.workdir]:
            result = await second.run(f"cat {target} || ls {target}")
            assert "Permission denied" in result.output and "private" not in result.output
        listing = await second.run(f"ls {first.root.parent}")
        assert "Permission denied" in listing.output


@needs_root
async def test_a_hanging_command_is_killed_at_its_timeout() -> None:
    async with sandbox(command_timeout=1) as box:
        result = await box.run("echo waiting; sleep 100")
        assert result.timed_out and result.exit_code == -9
        assert result.render().endswith(
            "[timed out after 1 s: the command was killed]\n[exit code 137 (killed by SIGKILL)]"
        )
        assert result.output == "waiting\n"
        assert await gone(box.uid)


@needs_root
async def test_a_fork_bomb_is_bounded_and_leaves_nothing_behind() -> None:
    limits = Limits(processes=32)
    async with sandbox(command_timeout=3, limits=limits) as box:
        result = await box.run(":(){ :|:& };:; sleep 30")  # the bomb, and a command that waits
        assert result.timed_out
        assert await gone(box.uid), "the bomb's process group outlived the timeout"
    uid: int | None = None
    async with sandbox(command_timeout=3, limits=limits) as box:
        uid = box.uid
        result = await box.run(":(){ :|:& };:")  # returns at once, the bomb runs on
        assert result.background
        assert processes_of(box.uid or 0), "the bomb should still run until the episode ends"
    assert await gone(uid), "closing the episode left processes of its uid"


@needs_root
async def test_an_output_flood_is_cut_and_stopped() -> None:
    async with sandbox(hard_output_limit=1 * MiB) as box:
        result = await box.run("yes")
        assert result.flooded and result.exit_code == -9
        text = result.render()
        assert len(text) < 9000
        assert "bytes of output cut" in text
        assert "[more than 1 MiB of output: the command was killed]" in text
        assert await gone(box.uid)


@needs_root
async def test_a_flood_to_disk_stops_at_the_file_size_limit() -> None:
    async with sandbox(limits=Limits(file_bytes=1 * MiB)) as box:
        result = await box.run("head -c 3000000 /dev/zero > big; echo status $?; stat -c %s big")
        assert result.output.split()[-3:] == ["status", "153", str(1 * MiB)]  # 128 + SIGXFSZ


async def test_long_output_keeps_its_head_and_tail() -> None:
    async with sandbox() as box:
        result = await box.run("seq 1 100000")
        text = result.render()
        assert text.startswith("1\n2\n3\n")
        assert text.endswith("99999\n100000\n[exit code 0]")
        assert "bytes of output cut: the first 4096 and the last 4096 bytes are shown" in text
        assert result.total_bytes == len("\n".join(map(str, range(1, 100001)))) + 1


@needs_root
async def test_background_processes_and_leftovers_die_with_the_episode() -> None:
    async with sandbox() as box:
        uid = box.uid
        first = await box.run("sleep 1000 & echo started")
        assert first.output == "started\n" and first.background
        assert "still run" in first.render()
        await box.run("setsid sleep 1001 > /dev/null 2>&1 & nohup sleep 1002 > /dev/null 2>&1 &")
        await box.run(f"echo x > /tmp/turnbon-leftover-{uid}")
        assert len(processes_of(box.uid or 0)) >= 3
        root = box.root
    assert await gone(uid)
    assert not await asyncio.to_thread(root.exists)
    assert not await asyncio.to_thread(Path(f"/tmp/turnbon-leftover-{uid}").exists)


@needs_root
async def test_a_cancelled_command_is_killed() -> None:
    async with sandbox() as box:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(box.run("sleep 100; echo never"), 0.5)
        assert await gone(box.uid)
        assert (await box.run("echo still usable")).output == "still usable\n"


async def test_the_shell_tool() -> None:
    async with sandbox() as box:
        tool = ShellTool(box)
        assert tool.name == "shell"
        assert tool.args == {"command": tool.args["command"]}
        assert tool.args["command"]["type"] == "string"
        assert "60 s" in tool.description
        assert await tool.ainvoke({"command": "echo hi; exit 4"}) == "hi\n[exit code 4]"
        assert tool.invoke({"command": "echo sync"}) == "sync\n[exit code 0]"


async def test_without_a_uid_of_its_own_commands_still_get_a_clean_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    async with sandbox(isolate_user=False) as box:
        assert box.uid is None
        result = await box.run("id -u; env")
        assert result.output.splitlines()[0] == str(os.geteuid())
        assert SECRETS["OPENAI_API_KEY"] not in result.output
        marker = f"turnbon-bg-{os.getpid()}-{time.monotonic_ns()}"
        await box.run(f"exec -a {marker} sleep 1000 &")
        assert _pids_named(marker)
    assert await _ends(lambda: not _pids_named(marker))


def _pids_named(name: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
                state = Path(entry.path, "stat").read_text().split(") ")[-1][:1]
            except OSError:
                continue
            if cmdline.split(b"\0")[0] == name.encode() and state != "Z":
                found.append(int(entry.name))
    return found


CRASHING_RUN = """
import asyncio, os, sys
from turnbon_terminal.sandbox import SandboxHost, SandboxSettings

async def main() -> None:
    box = SandboxHost(SandboxSettings()).create("crashed")
    await box.run("sleep 1000 > /dev/null 2>&1 &")
    print(box.uid, box.root, flush=True)
    os._exit(0)  # a crash: nothing is closed

asyncio.run(main())
"""


@needs_root
async def test_what_a_crashed_run_left_is_cleared_when_its_uid_is_leased_again() -> None:
    crashed = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_RUN,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "integrations")},
    )
    out, _ = await crashed.communicate()
    uid_text, root_text = out.decode().split()
    uid, root = int(uid_text), Path(root_text)
    assert processes_of(uid)
    assert await asyncio.to_thread(root.is_dir)
    async with sandbox() as box:
        if box.uid != uid:  # the lowest free uid, unless a concurrent run took it first
            pytest.skip("another run leased the crashed uid first (and cleaned it up)")
        assert not processes_of(uid)
        assert not await asyncio.to_thread(root.exists)
