"""Terminal-Bench 2 tasks as the field checks and runs them, under real Podman: the
oracle and nop agents on a task whose Dockerfile installs a package with apt, images
built once and shared, `--force-build`, a failed build that leaves nothing, a test.sh
whose own download fails, and `turnbon images prune`."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import uuid
from asyncio.subprocess import PIPE
from pathlib import Path

import pytest

from tests.container_tasks import BASE_IMAGE, HELLO, image_exists, needs_podman, tb2_task
from turnbon_graph.cli import main
from turnbon_terminal import TerminalEnvironment
from turnbon_terminal.container.engine import Engine
from turnbon_terminal.container.episode import ContainerEpisode
from turnbon_terminal.container.images import IMAGE_PREFIX, image_key, lock_path
from turnbon_terminal.container.owners import IMAGE_LABEL

pytestmark = needs_podman

APT_TASK = HELLO.parent / "apt-jq"
HOLD = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)
"""A process that holds a lock file until its stdin closes."""


def _image_id(name: str) -> str:
    done = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", name],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _keyed(key: str) -> list[str]:
    """Every image (layers too) labelled with the image key `key`."""
    done = subprocess.run(
        ["podman", "images", "-a", "-q", "--filter", f"label={IMAGE_LABEL}={key}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.split()


def _fresh(root: Path, name: str, dockerfile: str | None = None) -> Path:
    """A copy of hello-file whose build context is new (a key no other test shares)."""
    folder = tb2_task(root, name)
    (folder / "environment" / "fresh.txt").write_text(uuid.uuid4().hex)
    if dockerfile is not None:
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    return folder


def _key(image: str) -> str:
    return image.removeprefix(IMAGE_PREFIX).partition(":")[0]


def test_the_oracle_passes_and_nop_fails_a_task_that_installs_with_apt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(APT_TASK), "--agent", "oracle"]) == 0
    out = capsys.readouterr().out
    assert "agent oracle" in out and "Verdict: PASS (reward 1)" in out
    assert main(["run", str(APT_TASK), "--agent", "nop"]) == 0  # a FAIL is what nop should get
    out = capsys.readouterr().out
    assert "Verdict: FAIL (reward 0)" in out


async def test_a_second_episode_builds_nothing(tmp_path: Path) -> None:
    env = TerminalEnvironment(_fresh(tmp_path, "once"))
    names = []
    for trial in range(2):
        episode = await env.start(env.tasks()[0], trial)
        assert isinstance(episode, ContainerEpisode) and episode.container.image is not None
        names.append(episode.container.image.name)
        if trial == 0:
            first = await asyncio.to_thread(_image_id, names[0])
        await episode.close()
    assert names[0] == names[1] and names[0].endswith(":cached")
    assert await asyncio.to_thread(_image_id, names[1]) == first  # the same image, not rebuilt
    assert await asyncio.to_thread(main, ["images", "prune", _key(names[0])]) == 0
    assert not await asyncio.to_thread(image_exists, names[0])


async def test_an_episode_waits_while_another_process_builds_its_image(tmp_path: Path) -> None:
    folder = _fresh(tmp_path, "shared")
    env = TerminalEnvironment(folder)
    key = await image_key(env.containers.engine, folder / "environment" / "Dockerfile")
    lock = lock_path(key)
    lock.parent.mkdir(mode=0o700, exist_ok=True)
    holder = await asyncio.create_subprocess_exec(  # another process building it
        sys.executable, "-c", HOLD, str(lock), stdin=PIPE, stdout=PIPE
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert await holder.stdout.readline() == b"held\n"
    start = asyncio.ensure_future(env.start(env.tasks()[0], 0))
    done, _ = await asyncio.wait({start}, timeout=3.0)
    assert not done and await asyncio.to_thread(_keyed, key) == []  # waiting, not building
    holder.stdin.close()
    await holder.wait()
    episode = await start
    image = episode.container.image  # type: ignore[attr-defined]
    await episode.close()
    assert image is not None and _key(image.name) == key
    assert await asyncio.to_thread(main, ["images", "prune", key]) == 0


async def test_force_build_builds_a_task_that_names_an_image(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    folder = tb2_task(tmp_path, "named", environment=f'docker_image = "{BASE_IMAGE}"\n')
    dockerfile = f"FROM {BASE_IMAGE}\nRUN echo {marker} > /built-here\n"
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    seen = []
    for force in (False, True):
        env = TerminalEnvironment(folder, force_build=force)
        episode = await env.start(env.tasks()[0], 0)
        assert isinstance(episode, ContainerEpisode) and episode.container.image is not None
        seen.append((episode.container.image.name, (await episode.run("cat /built-here")).output))
        await episode.close()
    assert seen[0][0] == BASE_IMAGE and marker not in seen[0][1]
    assert seen[1][0].startswith(IMAGE_PREFIX) and marker in seen[1][1]
    assert await asyncio.to_thread(main, ["images", "prune", _key(seen[1][0])]) == 0


def test_a_failed_build_leaves_no_layer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dockerfile = f"FROM {BASE_IMAGE}\nRUN echo a-layer > /a\nRUN exit 3\n"
    folder = _fresh(tmp_path, "unbuildable", dockerfile)
    assert main(["run", str(folder), "--agent", "nop"]) == 1
    out = capsys.readouterr().out
    assert "did not build" in out
    key = asyncio.run(image_key(Engine.find(), folder / "environment" / "Dockerfile"))
    assert _keyed(key) == []  # the layer of `echo a-layer` was removed with the rest


def test_a_test_sh_whose_download_fails_is_reported_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    tb2_task(tasks, "good")
    tb2_task(
        tasks,
        "downloads",
        test_sh="curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"
        "source $HOME/.local/bin/env\nuvx -p 3.13 -w pytest==8.4.1 pytest /tests -rA\n"
        "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n",
    )
    broken = tb2_task(tasks, "wrong-solution")
    (broken / "solution" / "solve.sh").write_text("#!/bin/bash\necho 'Hello, moon!' > hello.txt\n")
    run = tmp_path / "run"
    code = main(["bench", "--agent", "oracle", "--tasks", str(tasks), "--run", str(run)])
    out = capsys.readouterr().out
    assert code == 1
    assert "Task check: 2 of 3 tasks do not end as they should under oracle" in out
    assert "- downloads: 1 of 1 episodes, verifier failed: verifier: tests/test.sh's own " in out
    assert "curl: command not found" in out  # the base image has no curl: not the network
    assert "- wrong-solution: 1 of 1 episodes, wrong submission" in out
    assert "FAIL: /app/hello.txt is missing or wrong" in out  # test.sh's tail
    assert main(["report", str(run)]) == 0
    report = (run / "report" / "report.md").read_text()
    assert "## Task check" in report and "**2 of 3 tasks do not:**" in report
    assert "| Agent | `oracle` (no model) |" in report
    shutil.rmtree(run)
