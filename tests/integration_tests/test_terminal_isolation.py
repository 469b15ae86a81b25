"""What the bwrap sandbox keeps from the agent, through `TerminalEnvironment` episodes:
the runner's environment, its loopback ports, the tasks' tests and solutions, the
verification (a background loop cannot survive into it), other runs' processes.

Each check runs as this process's user and, when this process is root, again as an
unprivileged user (`setpriv` to nobody), where the sandbox is made without root."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.integration_tests.test_terminal_sandbox import (
    ends,
    marker,
    pids_named,
    shared_tmp,  # noqa: F401 (a fixture)
)
from turnbon_terminal import TerminalEnvironment, TerminalEpisode

FAKE_KEY = "sk-test-isolation-6b1f0d"
MARK = "turnbon-isolation-marker-5d2c"
TEST_NAME = "test_isolation_marker_5d2c.py"


def write_task(root: Path, *, internet: bool = False) -> Path:
    """A task whose answer is out.txt saying 42, with a uniquely named test file."""
    folder = root / "isolation"
    for part in ("tests", "environment", "solution"):
        (folder / part).mkdir(parents=True)
    (folder / "instruction.md").write_text("Write 42 to out.txt.\n")
    network = "[environment]\nallow_internet = true\n" if internet else ""
    (folder / "task.toml").write_text(f"[verifier]\ntimeout_sec = 30\n{network}")
    (folder / "solution" / "solve.sh").write_text(f"# {MARK}\necho 42 > out.txt\n")
    (folder / "tests" / TEST_NAME).write_text(
        textwrap.dedent(f"""
        import os
        from pathlib import Path

        # {MARK}
        def test_answer() -> None:
            out = Path(os.environ["TASK_WORKDIR"]) / "out.txt"
            assert out.read_text().strip() == "42"
        """)
    )
    return root


@asynccontextmanager
async def episode(root: Path, **options: object) -> AsyncIterator[TerminalEpisode]:
    env = TerminalEnvironment(root, **options)  # type: ignore[arg-type]
    spec = next(t for t in env.tasks() if t.id == "isolation")
    started = await env.start(spec, 0)
    try:
        yield started
    finally:
        await started.close()


async def test_the_runners_environment_is_not_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    async with episode(write_task(tmp_path)) as run:
        result = await run.run("env; cat /proc/$PPID/environ; cat /proc/*/environ")
    assert FAKE_KEY not in result.output and "OPENAI_API_KEY" not in result.output
    assert "TASK_WORKDIR=" in result.output


@pytest.mark.parametrize("internet", [False, True])
async def test_a_loopback_port_of_the_host_is_out_of_reach(tmp_path: Path, internet: bool) -> None:
    connected: list[bool] = []

    async def note(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.append(True)
        writer.close()

    server = await asyncio.start_server(note, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with episode(write_task(tmp_path, internet=internet)) as run:
            result = await run.run(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    finally:
        server.close()
        await server.wait_closed()
    # Without allow_internet the sandbox has a loopback of its own; with it, the host's.
    assert ("connected" in result.output) == internet, result.output
    assert bool(connected) == internet


async def test_no_tests_or_solutions_are_visible(tmp_path: Path) -> None:
    async with episode(write_task(tmp_path)) as run:
        shipped = TerminalEnvironment().task("greet-script")
        names = [TEST_NAME, "solve.sh", *(p.name for p in shipped.tests_dir.glob("test_*.py"))]
        search = " -o ".join(f"-name {name}" for name in names)
        found = await run.run(f"find / -path /proc -prune -o \\( {search} \\) -print 2>/dev/null")
        grep = await run.run(f"grep -rl {MARK} / --exclude-dir=proc --exclude-dir=usr 2>&1")
    assert found.output == "", found.output
    assert MARK not in grep.output.replace(f"grep -rl {MARK}", "")


LOOP = """
(while true; do
   for f in $(find / ../ ../.. -name 'test_*.py' 2>/dev/null); do
     printf 'def test_ok() -> None:\\n    pass\\n' > "$f" 2>/dev/null
   done
   sleep 0.05
 done) > /dev/null 2>&1 &
echo 41 > out.txt
"""


async def test_a_background_loop_cannot_rewrite_the_tests_it_is_verified_by(
    tmp_path: Path,
) -> None:
    async with episode(write_task(tmp_path)) as run:
        started = await run.run(LOOP)
        assert started.ok
        verdict = await run.verify()
    assert not verdict.passed and verdict.error is None, verdict
    assert "1 failed" in verdict.output


async def test_runs_with_different_work_roots_cannot_see_or_kill_each_other(
    tmp_path: Path,
    shared_tmp: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    name = marker()
    tasks = write_task(tmp_path / "tasks")
    async with (
        episode(tasks, work_root=shared_tmp / "a") as first,
        episode(tasks, work_root=shared_tmp / "b") as second,
    ):
        if first.sandbox.uid is not None:
            assert first.sandbox.uid != second.sandbox.uid
        await first.run(f"(exec -a {name} sleep 1000) &")
        seen = await second.run("ps -e -o args=")
        assert name not in seen.output and "sleep 1000" not in seen.output
        await second.run(f"kill -9 -1; pkill -9 -f {name}")
        assert pids_named(name), "the other run killed it"
        assert (await first.run(f"ps -e -o args= | grep -c {name}")).output.strip() != "0"
        peek = await second.run(f"ls {first.workdir}")
        assert "No such file" in peek.output
    assert await ends(lambda: not pids_named(name))


# ------------------------------------------------------------------- as a non-root user

UNPRIVILEGED = """
import asyncio, json, os, sys
from pathlib import Path
sys.path[:0] = json.loads(sys.argv[1])
from turnbon_terminal import TerminalEnvironment

async def main() -> None:
    root = Path(sys.argv[2])
    env = TerminalEnvironment(root / "tasks", work_root=root / "work")
    spec = env.tasks()[0]
    run = await env.start(spec, 0)
    try:
        seen = await run.run("id -u; env; cat /proc/$PPID/environ; ls /root; ps -e -o args=")
        port = await run.run("exec 3<>/dev/tcp/127.0.0.1/%s && echo connected" % sys.argv[3])
        found = await run.run("find / -path /proc -prune -o -name solve.sh -print 2>/dev/null")
        await run.run(sys.argv[4])
        verdict = await run.verify()
    finally:
        await run.close()
    print(json.dumps({
        "uid": os.geteuid(), "seen": seen.output, "port": port.output,
        "found": found.output, "passed": verdict.passed, "error": verdict.error,
    }))

asyncio.run(main())
"""


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _unprivileged_python() -> tuple[str, list[str]] | None:
    """A Python nobody can run with this one's packages on its path, or None."""
    site = [p for p in sys.path if p.endswith("site-packages")]
    here = Path(__file__).resolve().parents[2]
    path = [*site, str(here), str(here / "integrations")]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = shutil.which(version, path="/usr/bin:/usr/local/bin")
    if python is None or not shutil.which("setpriv"):
        return None
    probe = subprocess.run(
        [
            *AS_NOBODY,
            python,
            "-c",
            "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); import turnbon_terminal",
            json.dumps(path),
        ],
        capture_output=True,
        check=False,
    )
    return (python, path) if probe.returncode == 0 else None


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root, then setpriv's to nobody")
async def test_the_same_isolation_as_an_unprivileged_user(
    shared_tmp: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    tmp_path = shared_tmp
    found = await asyncio.to_thread(_unprivileged_python)
    if found is None:
        pytest.skip(
            f"no python{sys.version_info.major}.{sys.version_info.minor} that nobody "
            "can run with this one's packages (and setpriv)"
        )
    python, path = found
    write_task(tmp_path / "tasks")
    for place in [tmp_path, *tmp_path.rglob("*")]:
        os.chown(place, 65534, 65534)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        child = await asyncio.create_subprocess_exec(
            *AS_NOBODY,
            python,
            "-c",
            UNPRIVILEGED,
            json.dumps(path),
            str(tmp_path),
            str(listener.getsockname()[1]),
            LOOP,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": FAKE_KEY},
            cwd=tmp_path,
        )
        out, err = await child.communicate()
    finally:
        listener.close()
    assert child.returncode == 0, err.decode()[-3000:]
    report = json.loads(out.decode().splitlines()[-1])
    assert report["uid"] == 65534 and report["seen"].startswith("65534\n")
    assert FAKE_KEY not in report["seen"] and "No such file" in report["seen"]
    assert "python" not in report["seen"].split("No such file")[-1], "runner's processes seen"
    assert "connected" not in report["port"]
    assert report["found"] == ""
    assert report["passed"] is False and report["error"] is None
