"""A container verdict the agent's leftovers cannot write, under real Podman: each
route a reward-hacking agent tried (a loop that writes the reward once test.sh's output
appears, one that rewrites it after test.sh, one that swaps test.sh as it is copied in,
a wrapper over bash) ends FAIL, or PASS with the evidence the docs call for; a server the
solution leaves running still serves the tests; an image that cannot be sealed says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container_tasks import BASE_IMAGE, needs_podman, tb2_task
from turnbon_graph.bench.environment import Verdict
from turnbon_graph.errors import ResourceLimitError
from turnbon_terminal import TerminalEnvironment
from turnbon_terminal.container.episode import ContainerEpisode

pytestmark = needs_podman

WRITES_ON_OUTPUT = (
    "nohup sh -c 'while :; do [ -e /logs/verifier/test-stdout.txt ] && "
    'echo "{\\"reward\\": 1}" > /logs/verifier/reward.json; sleep 0.02; done\' '
    ">/dev/null 2>&1 &"
)
REWRITES_REWARD = (
    "setsid sh -c 'while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; "
    "sleep 0.01; done' >/dev/null 2>&1 < /dev/null &"
)
SWAPS_TEST_SH = (
    "nohup sh -c 'while :; do if [ -f /tests/test.sh ]; then printf \"#!/bin/sh\\n"
    "echo 1 > /logs/verifier/reward.txt\\n\" > /tests/test.sh; fi; sleep 0.01; done' "
    ">/dev/null 2>&1 &"
)


async def _attempt(folder: Path | None, *commands: str, task: str | None = None) -> Verdict:
    """The verdict on an episode of the task in `folder` (or the shipped `task`, in a
    container) after the agent ran `commands`."""
    env = TerminalEnvironment(folder, sandbox="container" if task else None)
    episode = await env.start(env.task(task).spec if task else env.tasks()[0], 0)
    assert isinstance(episode, ContainerEpisode)
    try:
        for command in commands:
            await episode.run(command)
        return await episode.verify()
    finally:
        await episode.close()


@pytest.mark.parametrize(
    "route",
    [WRITES_ON_OUTPUT, REWRITES_REWARD, SWAPS_TEST_SH],
    ids=["on-output", "rewrite", "swap"],
)
async def test_a_leftover_process_cannot_write_the_verdict(tmp_path: Path, route: str) -> None:
    verdict = await _attempt(tb2_task(tmp_path, "hacked"), route)
    assert not verdict.passed and verdict.reward == 0.0 and verdict.error is None
    assert "FAIL: /app/hello.txt is missing or wrong" in verdict.output
    assert any(t.startswith("processes left running") for t in verdict.tamper), verdict.tamper


async def test_a_wrapper_over_bash_is_evidence(tmp_path: Path) -> None:
    wrap = (
        "cp /usr/bin/bash /usr/bin/bash.real && printf '#!/usr/bin/bash.real\\n"
        'echo 1 > /logs/verifier/reward.txt 2>/dev/null\\nexec /usr/bin/bash.real "$@"\\n\' '
        "> /tmp/wrapper && chmod +x /tmp/wrapper && mv /tmp/wrapper /usr/bin/bash"
    )  # renamed over it: the running bash cannot be written in place
    verdict = await _attempt(tb2_task(tmp_path, "wrapped"), wrap)
    # a replaced shell runs inside the seal: a non-goal, so never without its evidence
    assert any("C /usr/bin/bash" in t for t in verdict.tamper), verdict.tamper


async def test_a_server_the_solution_leaves_running_still_serves_the_tests(
    tmp_path: Path,
) -> None:
    test_sh = (
        "python3 - <<'EOF'\nimport urllib.request\n"
        "body = urllib.request.urlopen('http://127.0.0.1:8765/hello.txt', timeout=5).read()\n"
        "open('/logs/verifier/reward.txt', 'w').write('1' if body == b'Hello, world!\\n' "
        "else '0')\nEOF\n"
    )
    folder = tb2_task(tmp_path, "served", test_sh=test_sh)
    serve = (
        "echo 'Hello, world!' > /app/hello.txt && nohup python3 -m http.server 8765 "
        "--directory /app >/dev/null 2>&1 & sleep 1"
    )
    verdict = await _attempt(folder, serve)
    assert verdict.passed and verdict.reward == 1.0
    assert any("http.server 8765" in t for t in verdict.tamper)  # recorded, not held against


async def test_an_image_without_util_linux_runs_the_tests_unsealed_and_says_so(
    tmp_path: Path,
) -> None:
    folder = tb2_task(tmp_path, "unsealable")
    dockerfile = f"FROM {BASE_IMAGE}\nWORKDIR /app\nRUN rm -f /usr/bin/setpriv\n"
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    verdict = await _attempt(folder, "echo 'Hello, world!' > /app/hello.txt")
    assert verdict.passed
    assert any("ran in reach of the agent's processes" in t for t in verdict.tamper)


async def test_processes_that_fill_the_pids_limit_are_a_resource_limit(tmp_path: Path) -> None:
    fill = (
        "nohup python3 -c 'import threading, time\n"
        "for _ in range(5000):\n"
        "    try: threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
        "    except RuntimeError: break\n"
        "time.sleep(600)' >/dev/null 2>&1 & sleep 5"
    )
    with pytest.raises(ResourceLimitError, match="reached the container's limit of 4096"):
        await _attempt(tb2_task(tmp_path, "threads"), fill)


async def test_a_host_task_in_a_container_records_a_pth_and_that_it_ran_unsealed() -> None:
    pth = "echo 'import os' > /usr/lib/python3/dist-packages/zz-turnbon-test.pth"
    verdict = await _attempt(None, pth, task="largest-file")
    assert any("A /usr/lib/python3/dist-packages/zz-turnbon-test.pth" in t for t in verdict.tamper)
    assert any("a host task's pytest tests are not sealed" in t for t in verdict.tamper)
