"""The terminal sandbox with real processes: namespaces, secrets, hangs, bombs, floods,
leftovers; the bwrap sandbox by default, and the uid fallback where it is asked for.

Run as root, each episode also runs as a uid of its own; the tests that depend on that
are skipped otherwise. `test_terminal_isolation.py` runs the isolation checks as a
non-root user too."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from turnbon_terminal import Limits, Sandbox, SandboxSettings, ShellTool
from turnbon_terminal.host.cgroups import CgroupSupport, group_name
from turnbon_terminal.host.sandbox import SandboxHost
from turnbon_terminal.host.users import processes_of
from turnbon_terminal.task.limits import MiB

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


async def ends(condition: Callable[[], bool], within: float = 3.0) -> bool:
    """Polls `condition` until it holds or `within` seconds pass (killed processes take
    a moment to go: there is no event to wait for)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def marker() -> str:
    """A name no other process has: `exec -a <marker> sleep` tags one."""
    return f"turnbon-mark-{os.getpid()}-{time.monotonic_ns()}"


def pids_named(name: str) -> list[int]:
    """Live host processes whose argv[0] is `name` (read from /proc, not our code)."""
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


def in_namespace(inode: int) -> list[int]:
    """Live host processes in the PID namespace `inode`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                same = os.stat(f"{entry.path}/ns/pid").st_ino == inode
                state = Path(entry.path, "stat").read_text().split(") ")[-1][:1]
            except OSError:
                continue
            if same and state != "Z":
                found.append(int(entry.name))
    return found


async def pid_namespace(box: Sandbox) -> int:
    return int((await box.run("stat -L -c %i /proc/self/ns/pid")).output)


async def test_commands_run_in_the_episodes_directory_and_namespaces() -> None:
    async with sandbox() as box:
        result = await box.run('id -u; pwd; echo "$HOME"; stat -c %a .; ls /; ls /root')
        uid, cwd, home, mode, *rest = result.output.splitlines()
        assert int(uid) == (box.uid if ROOT else os.geteuid())
        if ROOT:
            assert box.uid is not None and box.uid >= 1_000_000
        # The work folder at the path every episode and fork sees it at.
        assert cwd == home == str(box.inside(box.workdir)) == "/sandbox/work"
        assert mode == "700"
        assert "No such file or directory" in rest[-1]  # no /root, /home, /work...
        assert not {"root", "home", "work", "run"} & set(rest[:-1])
        assert result.exit_code == 2
        pids = (await box.run("ps -e -o pid= | wc -l; echo $$")).output.split()
        assert int(pids[0]) <= 5 and int(pids[1]) < 100  # pid 1, its keeper, this shell


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
            "cat /proc/$PPID/environ",  # the bash's parent: outside the namespace
            f"cat /proc/{os.getpid()}/environ",  # this test process
            "cat /proc/1/environ",
            "for f in /proc/[0-9]*/environ; do cat $f; done 2>/dev/null | tr '\\0' '\\n'",
        ]
        outputs = [(await box.run(c)).output for c in commands]
    for command, output in zip(commands, outputs, strict=True):
        for value in SECRETS.values():
            assert value not in output, f"{command} showed a secret"
    assert "PATH=" in outputs[0] and "TASK_WORKDIR=" in outputs[1]
    assert "No such file" in outputs[3] and "No such file" in outputs[4]


async def test_episodes_cannot_see_each_others_files() -> None:
    async with sandbox() as first, sandbox() as second:
        assert first.uid != second.uid or not ROOT
        await first.run("echo private > note.txt; echo private > $TMPDIR/t.txt")
        for target in [first.workdir / "note.txt", first.tmpdir / "t.txt", first.workdir]:
            result = await second.run(f"cat {target} || ls {target}")
            assert "No such file" in result.output and "private" not in result.output
        # No episode's host folder is in a sandbox: each sees its own at /sandbox.
        listing = await second.run(f"ls {first.root.parent} {second.root}")
        assert "No such file" in listing.output and first.root.name not in listing.output


async def test_a_hanging_command_is_killed_at_its_timeout() -> None:
    name = marker()
    async with sandbox(command_timeout=1) as box:
        result = await box.run(f"echo waiting; exec -a {name} sleep 100")
        assert result.timed_out and result.exit_code == -9
        assert result.render().endswith(
            "[timed out after 1 s: the command was killed]\n[exit code 137 (killed by SIGKILL)]"
        )
        assert result.output == "waiting\n"
        assert await ends(lambda: not pids_named(name))


async def test_a_fork_bomb_is_bounded_and_leaves_nothing_behind() -> None:
    limits = Limits(processes=32)
    async with sandbox(command_timeout=3, limits=limits) as box:
        result = await box.run(":(){ :|:& };:; sleep 30")  # the bomb, and a command that waits
        assert result.timed_out
    async with sandbox(command_timeout=3, limits=limits) as box:
        namespace = await pid_namespace(box)
        # Returns (or times out, if bash's own fork retries hit the limit): the bomb runs on.
        await box.run(":(){ :|:& };:")
        assert len(in_namespace(namespace)) > 3, "the bomb should run until the episode ends"
        assert len(in_namespace(namespace)) <= 32 + 4, "the process limit did not hold"
        uid = box.uid
    assert await ends(lambda: not in_namespace(namespace)), "closing left processes"
    if uid is not None:
        assert await ends(lambda: not processes_of(uid))


async def test_an_output_flood_is_cut_and_stopped() -> None:
    async with sandbox(hard_output_limit=1 * MiB) as box:
        namespace = await pid_namespace(box)
        result = await box.run("yes")
        assert result.flooded and result.exit_code == -9
        text = result.render()
        assert len(text) < 9000
        assert "bytes of output cut" in text
        assert "[more than 1 MiB of output: the command was killed]" in text

        # Killed with its group; a killed process takes a moment to go (on CI, `pgrep`
        # run right after it once still saw it), so this polls, and a `yes` that lived on
        # would fail it.
        def gone() -> bool:
            return not set(pids_named("yes")) & set(in_namespace(namespace))

        assert await ends(gone), "the flood's process lives on"


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


async def test_background_processes_live_until_the_episode_ends() -> None:
    names = [marker() for _ in range(3)]
    leftover = Path(f"/tmp/turnbon-leftover-{names[0]}")
    async with sandbox() as box:
        first = await box.run(f"(exec -a {names[0]} sleep 1000) & echo started")
        assert first.output == "started\n" and first.background
        assert "still run" in first.render()
        await box.run(
            f"setsid bash -c 'exec -a {names[1]} sleep 1001' > /dev/null 2>&1 &"
            f" nohup bash -c 'exec -a {names[2]} sleep 1002' > /dev/null 2>&1 &"
        )
        # A later command sees them (one PID namespace for the episode).
        listing = (await box.run("ps -e -o args=")).output
        assert all(name in listing for name in names)
        await box.run(f"echo x > {leftover}")  # the sandbox's own /tmp, not the host's
        assert not await asyncio.to_thread(leftover.exists)
        assert all(pids_named(name) for name in names)
        root = box.root
    assert await ends(lambda: not any(pids_named(name) for name in names))
    assert not await asyncio.to_thread(root.exists)


async def test_an_episode_whose_processes_were_all_killed_starts_again() -> None:
    name = marker()
    async with sandbox() as box:
        await box.run(f"echo kept > file.txt; (exec -a {name} sleep 1000) &")
        assert pids_named(name)
        await box.run("kill -9 -1")  # every process of the agent, its sandbox's keeper too
        result = await box.run("cat file.txt")
        assert result.output == "kept\n" and result.ok
        assert not pids_named(name)


async def test_a_cancelled_command_is_killed() -> None:
    name = marker()
    async with sandbox() as box:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(box.run(f"exec -a {name} sleep 100"), 0.5)
        assert await ends(lambda: not pids_named(name))
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


async def test_the_uid_fallback_is_warned_and_still_cleans_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    name = marker()
    with pytest.warns(UserWarning, match="sandbox='uid' is the weak fallback"):
        host = SandboxHost(SandboxSettings(sandbox="uid", isolate_user=False))
    box = host.create("test")
    try:
        assert box.uid is None and box.isolation == "uid"
        result = await box.run("id -u; env")
        assert result.output.splitlines()[0] == str(os.geteuid())
        assert SECRETS["OPENAI_API_KEY"] not in result.output
        await box.run(f"exec -a {name} sleep 1000 &")
        assert pids_named(name)
    finally:
        await box.close()
    assert await ends(lambda: not pids_named(name))


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder every user can pass through (pytest's tmp_path is private to us), for
    work roots and, as nobody, everything."""
    folder = Path(tempfile.mkdtemp(prefix="turnbon-sandbox-"))
    folder.chmod(0o711)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@needs_root
async def test_uid_leases_are_machine_wide_whatever_the_work_root(shared_tmp: Path) -> None:
    with pytest.warns(UserWarning):
        hosts = [
            SandboxHost(SandboxSettings(sandbox="uid", work_root=shared_tmp / name))
            for name in ("a", "b")
        ]
    first, second = hosts[0].create("a"), hosts[1].create("b")
    try:
        assert first.uid is not None and second.uid is not None
        assert first.uid != second.uid
        name = marker()
        await first.run(f"exec -a {name} sleep 1000 &")
        result = await second.run(f"cat {first.workdir}/x; pkill -9 -f {name}; echo done")
        assert "Permission denied" in result.output
        assert pids_named(name), "the second run killed the first one's process"
    finally:
        await first.close()
        await second.close()


CRASHING_RUN = """
import asyncio, os, sys
from turnbon_terminal.host.sandbox import SandboxHost, SandboxSettings

async def main() -> None:
    box = SandboxHost(SandboxSettings()).create("crashed")
    await box.run("exec -a turnbon-crashed-%s sleep 1000 > /dev/null 2>&1 &" % os.getpid())
    print(box.uid, box.root, os.getpid(), flush=True)
    os._exit(0)  # a crash: nothing is closed

asyncio.run(main())
"""


@needs_root
async def test_a_crashed_run_leaves_no_process_and_its_files_go_at_the_next_lease() -> None:
    crashed = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_RUN,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "integrations")},
    )
    out, _ = await crashed.communicate()
    uid_text, root_text, pid = out.decode().split()
    uid, root = int(uid_text), Path(root_text)
    # --die-with-parent: the sandbox died with the runner.
    assert await ends(lambda: not pids_named(f"turnbon-crashed-{pid}"))
    assert await asyncio.to_thread(root.is_dir)
    # Its file system is still mounted and its control group still there.
    support = CgroupSupport.detect()
    groups = [parent / group_name(root) for parent in support.parents]
    assert await asyncio.to_thread(os.path.ismount, root / "fs")
    assert groups and all(g.is_dir() for g in groups)
    async with sandbox() as box:
        if box.uid != uid:  # the lowest free uid, unless a concurrent run took it first
            pytest.skip("another run leased the crashed uid first (and cleaned it up)")
        assert not await asyncio.to_thread(root.exists)
        assert not await asyncio.to_thread(os.path.ismount, root / "fs")
        assert not any(g.exists() for g in groups)


def orphaned_bwrap_zombies() -> set[int]:
    """Zombie bwrap processes whose parent is gone (now init's, which in a container may
    reap them late or never)."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            name = fields[fields.index("(") + 1 : fields.rindex(")")]
            state, parent = fields.rsplit(") ", 1)[1].split()[:2]
            if name == "bwrap" and state == "Z" and parent == "1":
                found.add(int(entry.name))
    return found


async def test_an_episode_and_its_verifier_leave_no_zombie_and_no_bwrap_warning() -> None:
    from turnbon_terminal import TerminalEnvironment

    before = await asyncio.to_thread(orphaned_bwrap_zombies)
    environment = TerminalEnvironment()
    episode = await environment.start(environment.tasks()[0], 0)
    try:
        await episode.run("sleep 100 &")
        assert (await episode.run_solution()).ok
        verdict = await episode.verify()
    finally:
        await episode.close()
    assert verdict.passed, verdict
    assert "bwrap:" not in verdict.output  # e.g. "Only the last --chdir option will take effect"
    # Checked at once: every bwrap was reaped by its parent, none left for init.
    assert not (await asyncio.to_thread(orphaned_bwrap_zombies)) - before
