"""Terminal-Bench 2 tasks in containers, under real Podman: `turnbon run` on a task
folder with a Dockerfile, the reward file as the verdict, the budgets, the network, the
endings without a reward, and nothing left behind."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.container_tasks import (
    BASE_IMAGE,
    HELLO,
    image_exists,
    labelled,
    needs_podman,
    tb2_task,
)
from tests.helpers import episode_lines, runs_once, stub_engine, terminate
from turnbon_graph.bench.environment import TaskSpec, Verdict
from turnbon_graph.bench.episode import run_agent
from turnbon_graph.cli import main
from turnbon_graph.testing import StubServer
from turnbon_terminal import ContainerError, TerminalEnvironment, TerminalEpisode
from turnbon_terminal.container.episode import ContainerEpisode
from turnbon_terminal.container.owners import current_owner

pytestmark = needs_podman


def _left_behind() -> dict[str, list[str]]:
    owner = current_owner()
    return {kind: labelled(kind, owner) for kind in ("container", "volume", "image")}


def test_turnbon_run_passes_with_the_solution_judged_by_reward_txt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The stub policy proposes the task's solve.sh; the selector picks it.
    code = main(["run", str(HELLO), "--model", "stub", "-n", "4", "--seed", "0"])
    out = capsys.readouterr().out
    assert "Verdict: PASS (reward 1)" in out
    assert "of the container turnbon-hello-file-0-" in out
    assert code == 0
    assert _left_behind() == {"container": [], "volume": [], "image": []}
    assert image_exists(BASE_IMAGE)


def test_turnbon_run_fails_a_wrong_answer_with_reward_0(
    stub: StubServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-the-container")
    stub.script(runs_once("echo 'Hello, moon!' > /app/hello.txt && env"))
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "1"]
    code = main(["run", str(HELLO), *model, "--keep-workdir"])
    out = capsys.readouterr().out
    assert "Verdict: FAIL (reward 0)" in out
    assert code == 1
    assert "TASK_WORKDIR=/app" in out and "sk-test-not-for-the-container" not in out
    kept = re.search(r"Working copy kept: (\S+) \(the episode ran in /app of the container", out)
    assert kept is not None
    assert (Path(kept[1]) / "hello.txt").read_text() == "Hello, moon!\n"
    shutil.rmtree(Path(kept[1]).parent)
    assert _left_behind() == {"container": [], "volume": [], "image": []}


def test_turnbon_bench_runs_a_folder_of_tb2_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    tb2_task(tasks, "hello-a")
    tb2_task(tasks, "hello-b")
    options = ["--model", "stub", "-n", "4", "--trials", "1", "--concurrency", "2"]
    code = main(
        [
            "bench",
            "--env",
            "terminal",
            "--tasks",
            str(tasks),
            *options,
            "--run",
            str(tmp_path / "run"),
        ]
    )
    out = capsys.readouterr().out
    assert "terminal: 2 task(s)" in out
    assert "N=4: 100.0% pass (2/2)" in out
    assert code == 0
    rows = episode_lines(tmp_path / "run")
    assert [(r.outcome, r.reward) for r in rows] == [("pass", 1.0), ("pass", 1.0)]
    assert all("PASS: /app/hello.txt is right" in r.verifier_output for r in rows)
    assert _left_behind() == {"container": [], "volume": [], "image": []}


def test_the_host_sandbox_can_be_forced_and_refuses_a_container_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(HELLO), "--model", "stub", "--sandbox", "bwrap"]) == 2
    err = capsys.readouterr().err
    assert "task hello-file runs in a container" in err and "--sandbox bwrap" in err


def test_the_shipped_tasks_still_run_in_bubblewrap() -> None:
    env = TerminalEnvironment()
    task = env.task("largest-file")

    async def start() -> object:
        episode = await env.start(task.spec, 0)
        await episode.close()
        return episode

    assert isinstance(asyncio.run(start()), TerminalEpisode)
    assert task.container is None


def test_sandbox_container_runs_a_host_task_in_the_base_image(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # largest-file has no image: its files and setup.sh go into the base image's /app,
    # and its pytest tests run there as a TB2 test.sh runs its own.
    code = main(["run", "largest-file", "--sandbox", "container", "--model", "stub", "-n", "4"])
    out = capsys.readouterr().out
    assert "Verdict: PASS (reward 1)" in out
    assert "of the container turnbon-largest-file-0-" in out
    assert code == 0
    assert _left_behind() == {"container": [], "volume": [], "image": []}


async def test_kept_images_are_built_once_and_outlive_their_episodes(tmp_path: Path) -> None:
    folder = tb2_task(tmp_path, "cached")  # a context of its own: an image of its own
    (folder / "environment" / "marker.txt").write_text(str(tmp_path))
    env = TerminalEnvironment(folder, keep_images=True)
    names = []
    try:
        for trial in range(2):
            episode = await env.start(env.tasks()[0], trial)
            assert isinstance(episode, ContainerEpisode) and episode.container.image
            names.append((episode.container.image.name, episode.container.image.own))
            await episode.close()
        assert names[0] == names[1] and names[0][1] is False  # one image, not the episodes'
        assert names[0][0].endswith(":cached")
        assert await asyncio.to_thread(image_exists, names[0][0])
    finally:
        await env.containers.engine.remove("image", [name for name, _ in names[:1]])


def _episode(folder: Path) -> tuple[TerminalEnvironment, TaskSpec]:
    env = TerminalEnvironment(folder)
    return env, env.tasks()[0]


async def _started(folder: Path) -> ContainerEpisode:
    env, spec = _episode(folder)
    episode = await env.start(spec, 0)
    assert isinstance(episode, ContainerEpisode)
    return episode


def test_memory_over_memory_mb_ends_the_episode_as_a_resource_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run from an empty folder, which stays empty: on an OOM kill Podman's conmon writes an
    # `oom` file into the folder the engine's CLI runs in, which is never the user's.
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    folder = tb2_task(tmp_path, "hungry")
    toml = (folder / "task.toml").read_text().replace("memory_mb = 256", "memory_mb = 64")
    (folder / "task.toml").write_text(toml)

    async def scenario() -> tuple[str, str | None]:
        episode = await _started(folder)
        try:
            small = await episode.run("head -c 20M /dev/zero | tail > /dev/null")
            assert small.ok and small.over_budget is None
            big = await episode.run("head -c 200M /dev/zero | tail > /dev/null")
            return big.render(), big.over_budget
        finally:
            await episode.close()

    shown, over = asyncio.run(scenario())
    assert over is not None and over.startswith("memory: ") and "memory_mb = 64" in over
    assert "Killed" in shown and "[the episode went over its budget (memory" in shown
    assert list(here.iterdir()) == []


@pytest.mark.skipif(
    not Path("/dev/loop-control").exists(), reason="a storage budget needs loop devices"
)
def test_storage_over_storage_mb_is_refused_in_the_working_directory(tmp_path: Path) -> None:
    folder = tb2_task(tmp_path, "filler")
    toml = (folder / "task.toml").read_text().replace("storage_mb = 64", "storage_mb = 16")
    (folder / "task.toml").write_text(toml)

    async def scenario() -> tuple[str, str | None, str]:
        episode = await _started(folder)
        try:
            seeded = await episode.run("cat README.txt && df -m . | tail -1")
            full = await episode.run("dd if=/dev/zero of=big bs=1M count=40")
            return seeded.output, full.over_budget, full.output
        finally:
            await episode.close()

    seeded, over, said = asyncio.run(scenario())
    assert "Write hello.txt here." in seeded  # the image's /app was copied onto the volume
    assert "No space left on device" in said
    assert over is not None and over.startswith("storage: ") and "storage_mb = 16" in over


def test_the_network_is_off_unless_the_task_allows_it(tmp_path: Path) -> None:
    offline = HELLO
    online = tb2_task(tmp_path, "online", environment='network_mode = "public"\n')

    async def interfaces(folder: Path) -> str:
        episode = await _started(folder)
        try:
            return (await episode.run("ls /sys/class/net")).output.split()
        finally:
            await episode.close()

    assert asyncio.run(interfaces(offline)) == ["lo"]
    assert "eth0" in asyncio.run(interfaces(online))


async def _verified(
    folder: Path, *, solve: bool = False, then: str = "true"
) -> tuple[Verdict, str]:
    """The verdict on an episode of the task in `folder` (after its solution, with
    `solve`), and the output of the command `then` run after verification."""
    episode = await _started(folder)
    try:
        if solve:
            assert (await episode.run_solution()).ok
        verdict = await episode.verify()
        return verdict, (await episode.run(then)).output.strip()
    finally:
        await episode.close()


async def test_no_reward_file_is_an_agent_error_never_a_pass(tmp_path: Path) -> None:
    folder = tb2_task(tmp_path, "silent", test_sh="echo 'I checked nothing'\nexit 0\n")
    verdict, _ = await _verified(folder, solve=True)
    assert not verdict.passed and verdict.reward is None
    assert verdict.error is not None and "wrote no reward" in verdict.error
    assert "network" not in verdict.error  # nothing says the network was the cause
    assert "I checked nothing" in verdict.output


async def test_a_command_that_floods_or_outlives_its_limit_is_killed_inside() -> None:
    episode = await _started(HELLO)
    running = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null"
    try:
        flood = await episode.run("yes")
        slow = await episode.run("sleep 77", time_limit=1.0)
        left = await episode.run(f"{running} | grep -c -e '^yes' -e '^sleep 77' || true")
    finally:
        await episode.close()
    assert flood.flooded and "[more than 10 MiB of output: the command was killed]" in (
        flood.render()
    )
    assert slow.timed_out and "[timed out after 1 s: the command was killed]" in slow.render()
    assert left.output.strip() == "0"


async def test_a_reward_the_agent_wrote_is_never_the_verdict(tmp_path: Path) -> None:
    episode = await _started(tb2_task(tmp_path, "planted", test_sh="exit 0\n"))
    try:
        planted = await episode.run("echo 1 > /logs/verifier/reward.txt && echo 1 > reward.txt")
        assert planted.ok
        verdict = await episode.verify()
    finally:
        await episode.close()
    assert not verdict.passed and verdict.reward is None
    assert verdict.error is not None and "wrote no reward" in verdict.error


async def test_a_verifier_that_runs_out_of_time_is_a_fail(tmp_path: Path) -> None:
    script = "echo started\nsleep 60\necho 1 > /logs/verifier/reward.txt\n"
    folder = tb2_task(tmp_path, "slow", test_sh=script, verifier_timeout=4.0)
    sleeping = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null"
    verdict, count = await _verified(folder, then=f"{sleeping} | grep -c '^sleep 60' || true")
    assert not verdict.passed and verdict.error is None and verdict.reward is None
    assert verdict.reason is not None and "did not finish within 3.6 s" in verdict.reason
    assert "started" in verdict.output
    assert count == "0"  # killed inside the container, not only its client


async def test_a_fractional_reward_is_kept_and_fails(tmp_path: Path) -> None:
    script = "echo 0.5 > /logs/verifier/reward.txt\n"
    script += """echo '{"reward": 0.25}' > /logs/verifier/reward.json\n"""
    verdict, _ = await _verified(tb2_task(tmp_path, "partial", test_sh=script))
    assert not verdict.passed and verdict.reward == 0.25  # reward.json first, as Harbor
    assert verdict.reason == "reward 0.25 (a pass needs 1)"


async def test_a_reward_file_that_links_elsewhere_is_not_read(tmp_path: Path) -> None:
    script = "ln -s /etc/hostname /logs/verifier/reward.txt\n"
    verdict, _ = await _verified(tb2_task(tmp_path, "linked", test_sh=script))
    assert not verdict.passed and verdict.error is None  # the deliverable's FAIL
    assert verdict.tamper == [
        "/logs/verifier/reward.txt is a symbolic link: the reward was not read"
    ]


async def test_an_image_that_cannot_be_pulled_ends_the_start_by_its_full_name(
    tmp_path: Path,
) -> None:
    image = 'docker_image = "turnbon-graph-tests/no-such-image:0"\n'
    folder = tb2_task(tmp_path, "unpullable", environment=image)
    (folder / "environment" / "Dockerfile").unlink()
    env, spec = _episode(folder)
    with pytest.raises(ContainerError) as caught:
        await env.start(spec, 0)
    said = str(caught.value)
    assert "docker.io/turnbon-graph-tests/no-such-image:0 could not be pulled" in said
    assert "short-name" not in said  # Docker Hub's, as Docker reads it
    assert await asyncio.to_thread(_left_behind) == {"container": [], "volume": [], "image": []}


async def test_an_image_whose_user_is_not_root_works_and_is_verified_as_that_user(
    tmp_path: Path,
) -> None:
    folder = tb2_task(tmp_path, "unprivileged", test_sh=(HELLO / "tests" / "test.sh").read_text())
    dockerfile = f"FROM {BASE_IMAGE}\nWORKDIR /app\nRUN chown nobody /app\nUSER nobody\n"
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    verdict, who = await _verified(folder, solve=True, then="id -un; stat -c %U hello.txt")
    assert who.split() == ["nobody", "nobody"]
    assert verdict.passed and verdict.reward == 1.0


async def test_a_docker_image_task_runs_that_image_and_never_removes_it(tmp_path: Path) -> None:
    folder = tb2_task(tmp_path, "prebuilt", environment=f'docker_image = "{BASE_IMAGE}"\n')
    (folder / "environment" / "Dockerfile").unlink()
    verdict, where = await _verified(folder, solve=True, then="pwd")
    assert where == "/app"  # the image has no WORKDIR: /app, made
    assert verdict.passed and verdict.reward == 1.0
    assert await asyncio.to_thread(image_exists, BASE_IMAGE)


def test_a_task_that_does_not_build_ends_as_an_agent_error(tmp_path: Path) -> None:
    folder = tb2_task(tmp_path, "unbuildable")
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nRUN exit 3\n")
    env, spec = _episode(folder)

    async def scenario() -> object:
        with StubServer() as stub:
            stub.script(runs_once("true"))
            return await run_agent(env, stub_engine(stub, n=1), spec, 0)

    end = asyncio.run(scenario())
    assert end.outcome == "agent_error"
    assert end.error is not None and "did not build" in end.error
    assert _left_behind() == {"container": [], "volume": [], "image": []}


async def test_a_fork_copies_the_files_and_then_goes_its_own_way() -> None:
    episode = await _started(HELLO)
    sleeping = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null"
    try:
        setup = "rm README.txt && echo parent > mine.txt && echo kept > /tmp/t.txt"
        assert (await episode.run(f"{setup} && (sleep 300 > /dev/null 2>&1 &)")).ok
        fork = await episode.fork()
        try:
            seen = await fork.run(
                f"pwd; ls -A; cat mine.txt /tmp/t.txt; {sleeping} | grep -c '^sleep 300'"
            )
            assert seen.output.split() == ["/app", "mine.txt", "parent", "kept", "0"]
            await fork.run_solution()
            await fork.run("echo child > mine.txt")
            assert (await episode.run("cat mine.txt; ls -A")).output.split() == [
                "parent",
                "mine.txt",
            ]
            assert (await fork.verify()).passed and not (await episode.verify()).passed
        finally:
            await fork.close()
    finally:
        await episode.close()
    assert await asyncio.to_thread(_left_behind) == {"container": [], "volume": [], "image": []}


@pytest.fixture
def docker_on_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The Docker CLI, talking to Podman's Docker-compatible API on a socket of its own."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    socket = tmp_path / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        cwd=tmp_path,  # conmon, started by the service, writes an `oom` file into its folder
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if socket.exists():
                break
            time.sleep(0.1)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
        monkeypatch.setenv("TURNBON_ENGINE", "docker")
        yield
    finally:
        terminate(service)


@pytest.mark.usefixtures("docker_on_podman")
async def test_the_docker_cli_drives_the_same_episode() -> None:
    # Not a fork: Podman 4.3's Docker API answers every commit with "Decode(): EOF".
    episode = await _started(HELLO)
    try:
        assert episode.container.engine.name == "docker"
        shown = await episode.run("ls /sys/class/net; df -m . | tail -1")
        assert shown.output.split()[0] == "lo"
        assert ("/dev/loop" in shown.output) is (os.geteuid() == 0)  # the storage volume
        await episode.run_solution()
        assert (await episode.verify()).passed
        over = await episode.run("head -c 300M /dev/zero | tail > /dev/null")
        assert over.over_budget is not None and over.over_budget.startswith("memory: ")
    finally:
        await episode.close()
    assert await asyncio.to_thread(_left_behind) == {"container": [], "volume": [], "image": []}
