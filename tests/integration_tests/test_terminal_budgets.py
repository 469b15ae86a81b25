"""An episode's budget from its task.toml: memory, storage, CPUs and processes, enforced
for real (a control group and a loop-mounted file system, as root), the episode ended as
`resource_limit` when it goes over, and nothing left on the host afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.helpers import runs_once
from tests.integration_tests.test_terminal_isolation import AS_NOBODY, _unprivileged_python
from tests.integration_tests.test_terminal_sandbox import shared_tmp  # noqa: F401 (a fixture)
from turnbon_graph.cli import main
from turnbon_graph.errors import ResourceLimitError
from turnbon_graph.testing import StubServer
from turnbon_terminal import TerminalEnvironment, TerminalEpisode
from turnbon_terminal.task.enforcement import BudgetNotEnforcedWarning

ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(not ROOT, reason="budgets are enforced as root only")
GIB = 1 << 30
MIB = 1 << 20


def write_task(root: Path, *, memory_mb: int = 512, storage_mb: int = 512, cpus: float = 1) -> Path:
    """A task whose answer is out.txt saying 42, with the given budget."""
    folder = root / "budget-task"
    for part in ("tests", "environment"):
        (folder / part).mkdir(parents=True)
    (folder / "instruction.md").write_text("Write 42 to out.txt.\n")
    (folder / "task.toml").write_text(
        "[verifier]\ntimeout_sec = 30\n[agent]\ntimeout_sec = 120\n"
        f"[environment]\nmemory_mb = {memory_mb}\nstorage_mb = {storage_mb}\ncpus = {cpus}\n"
    )
    (folder / "tests" / "test_out.py").write_text(
        textwrap.dedent("""
        import os
        from pathlib import Path

        def test_answer() -> None:
            assert (Path(os.environ["TASK_WORKDIR"]) / "out.txt").read_text().strip() == "42"
        """)
    )
    return folder


@asynccontextmanager
async def episode(folder: Path, **options: object) -> AsyncIterator[TerminalEpisode]:
    environment = TerminalEnvironment(folder, command_timeout=120, **options)  # type: ignore[arg-type]
    started = await environment.start(environment.tasks()[0], 0)
    try:
        yield started
    finally:
        await started.close()


def shmem_bytes() -> int:
    """The host's memory held by tmpfs files (where an in-memory /tmp lives)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Shmem line in /proc/meminfo")


def free_disk(path: Path) -> int:
    return shutil.disk_usage(path).free


def mounts_below(folder: Path) -> list[str]:
    prefix = os.path.realpath(folder) + "/"
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line.split()[4] for line in lines if line.split()[4].startswith(prefix)]


GREEDY = {
    "the work folder": ("storage", "dd if=/dev/zero of=big bs=1M count=1024"),
    "TMPDIR": ("storage", 'dd if=/dev/zero of="$TMPDIR/big" bs=1M count=1024'),
    "/tmp": ("memory", "dd if=/dev/zero of=/tmp/big bs=1M count=1024"),
    "/dev/shm": ("memory", "dd if=/dev/zero of=/dev/shm/big bs=1M count=1024"),
    "one process": ("memory", "python3 -c 'b = bytearray(1 << 30); print(len(b))'"),
    "many small files": (
        "storage",
        "mkdir many; for i in $(seq 600); do head -c 1048576 /dev/zero > many/$i; done",
    ),
}


@pytest.mark.parametrize("where", list(GREEDY))
async def test_going_over_the_budget_anywhere_ends_the_episode(tmp_path: Path, where: str) -> None:
    kind, command = GREEDY[where]
    folder = write_task(tmp_path)
    disk, shmem = free_disk(tmp_path), shmem_bytes()
    async with episode(folder) as started:
        root = started.sandbox.root
        assert started.over_budget is None
        result = await started.run(command)
        assert started.over_budget is not None and started.over_budget.startswith(kind)
        assert f"[the episode went over its budget ({kind}:" in result.render()
        with pytest.raises(ResourceLimitError):
            await started.verify()  # no verdict for an episode that went over
        used = await started.run('du -sk --apparent-size "$TASK_WORKDIR" "$TMPDIR" | cut -f1')
        kept = sum(int(n) for n in used.output.split()[:2]) * 1024
        assert kept < 600 * MIB, "more than the budget reached the episode's disk"
    # Everything the episode held is back: its image, its mount, its tmpfs pages.
    assert not mounts_below(root)
    assert free_disk(tmp_path) > disk - 64 * MIB
    assert shmem_bytes() < shmem + 64 * MIB


async def test_within_the_budget_the_answer_still_passes(tmp_path: Path) -> None:
    async with episode(write_task(tmp_path)) as started:
        result = await started.run(
            "dd if=/dev/zero of=/tmp/scratch bs=1M count=100 status=none; "
            "python3 -c 'b = bytearray(100 << 20)'; echo 42 > out.txt"
        )
        assert result.ok and started.over_budget is None
        verdict = await started.verify()
        assert verdict.passed, verdict.output


async def test_the_root_and_dev_take_no_files(tmp_path: Path) -> None:
    async with episode(write_task(tmp_path)) as started:
        result = await started.run("touch /new 2>&1; touch /dev/new 2>&1; touch /usr/new 2>&1")
        assert result.output.count("Read-only file system") == 3


async def test_a_background_process_that_goes_over_is_caught_before_the_verdict(
    tmp_path: Path,
) -> None:
    async with episode(write_task(tmp_path)) as started:
        await started.run(
            "echo 42 > out.txt; (sleep 1; dd if=/dev/zero of=big bs=1M count=1024) "
            "> /dev/null 2>&1 &"
        )
        assert started.over_budget is None
        # The command returned before the writer began; give it time to fill the disk.
        for _ in range(200):
            if await started.sandbox.check_budget():
                break
            await asyncio.sleep(0.1)
        with pytest.raises(ResourceLimitError, match="storage"):
            await started.verify()


async def test_cpus_bound_the_episodes_cpu_share(tmp_path: Path) -> None:
    async with episode(write_task(tmp_path, cpus=0.1)) as started:
        group = started.sandbox.resources.cgroup
        assert group is not None
        await started.run("timeout 1 sh -c 'while :; do :; done'")
        stat = next(f for f in group.folders if (f / "cpu.stat").exists()) / "cpu.stat"
        throttled = dict(line.split() for line in stat.read_text().splitlines())
        assert int(throttled["nr_throttled"]) > 0, "the kernel never throttled the busy loop"


FORKS = """python3 -c '
import os, sys, time
made = 0
for _ in range(80):
    try:
        if os.fork() == 0:
            os.close(1); time.sleep(30); os._exit(0)
        made += 1
    except OSError:
        pass
print(made)'"""


async def test_processes_are_counted_for_the_episode(tmp_path: Path) -> None:
    from turnbon_terminal import Limits

    async with episode(write_task(tmp_path), limits=Limits(processes=40)) as started:
        group = started.sandbox.resources.cgroup
        assert group is not None
        # Python's fork fails at once past the limit (bash's own retries for seconds).
        result = await started.run(FORKS)
        assert 30 < int(result.output.split()[0]) < 40
        assert 30 < len(group.processes()) <= 40  # the kernel's own count of the group
        pids = next(f for f in group.folders if (f / "pids.max").exists())
        assert (pids / "pids.max").read_text().strip() == "40"


async def test_a_task_without_a_budget_gets_the_defaults(tmp_path: Path) -> None:
    folder = write_task(tmp_path)
    (folder / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    async with episode(folder) as started:
        assert started.sandbox.budget.memory_mb == 2048
        size = (await started.run("df --output=size -B1M . | tail -1")).output.split()[0]
        assert 9000 < int(size) <= 10240  # storage_mb = 10240, less the file system's own


async def test_enforce_budgets_false_leaves_the_rlimits_only(tmp_path: Path) -> None:
    async with episode(write_task(tmp_path), enforce_budgets=False) as started:
        assert started.sandbox.resources.cgroup is None
        assert not mounts_below(started.sandbox.root)
        await started.run("dd if=/dev/zero of=big bs=1M count=600 status=none")
        assert started.over_budget is None


def test_turnbon_run_reports_a_resource_limit(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    folder = write_task(tmp_path)
    stub.script(runs_once("dd if=/dev/zero of=big bs=1M count=1024"))  # fills its disk
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "2", "--selector", "first"]
    code = main(["run", str(folder), *model])
    out = capsys.readouterr().out
    assert "Ended: resource limit (the episode went over its budget: storage:" in out
    assert "Verdict:" not in out
    assert code == 1
    assert len(stub.requests) == 2, "the agent went on after its budget ran out"


UNPRIVILEGED = """
import asyncio, json, sys, warnings
sys.path[:0] = json.loads(sys.argv[1])
from turnbon_terminal import TerminalEnvironment

async def main() -> None:
    env = TerminalEnvironment(sys.argv[2], work_root=sys.argv[3])
    for trial in range(2):
        episode = await env.start(env.tasks()[0], trial)
        await episode.close()

warnings.simplefilter("always")
asyncio.run(main())
"""


async def test_an_unprivileged_run_says_once_what_it_cannot_enforce(
    shared_tmp: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    found = await asyncio.to_thread(_unprivileged_python)
    if found is None:
        pytest.skip("no python that nobody can run with this one's packages (and setpriv)")
    python, path = found
    folder = write_task(shared_tmp)
    for place in await asyncio.to_thread(lambda: [shared_tmp, *shared_tmp.rglob("*")]):
        os.chown(place, 65534, 65534)
    arguments = [json.dumps(path), str(folder), str(shared_tmp / "w")]
    done = await asyncio.to_thread(
        subprocess.run,
        [*AS_NOBODY, python, "-c", UNPRIVILEGED, *arguments],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("memory_mb, cpus and the process count per episode are NOT") == 1
    assert done.stderr.count("storage_mb is NOT enforced (mounting a file system") == 1
    assert BudgetNotEnforcedWarning.__name__ in done.stderr
