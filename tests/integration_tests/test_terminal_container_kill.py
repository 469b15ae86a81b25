"""A `turnbon run` of a container task that is stopped mid-episode leaves nothing running:
Ctrl-C (SIGINT) removes its container at once; after SIGKILL, which no process can
answer, the container outlives it only until the next run's sweep."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.container_tasks import HELLO, labelled, needs_podman, owned_by
from tests.helpers import default_sigint, runs_once
from turnbon_graph.testing import StubServer
from turnbon_terminal import TerminalEnvironment

pytestmark = needs_podman


def _run_mid_command(stub: StubServer) -> tuple[subprocess.Popen[str], str]:
    """`turnbon run` of the hello task whose agent runs `sleep 300`, once that command
    runs in its container: the process and the owner its container is labelled with."""
    stub.script(runs_once("sleep 300"))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    argv = ["run", str(HELLO), "--model", "openai/m", "--api-base", stub.base_url, "-n", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "turnbon_graph.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        mine = owned_by(process.pid)
        if mine and stub.received:
            time.sleep(2.0)  # the agent's command is running in the container
            return process, mine[0].split(" ")[-1]
        time.sleep(0.5)
    process.kill()
    pytest.fail(f"the run never started its container: {process.communicate()[0][-2000:]}")


def test_ctrl_c_removes_the_container_at_once(stub: StubServer) -> None:
    process, owner = _run_mid_command(stub)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 130, out[-2000:]
    assert "Stopped." in out
    assert owned_by(process.pid) == []
    assert labelled("volume", owner) == [] and labelled("image", owner) == []


def test_after_sigkill_the_next_runs_sweep_removes_what_was_left(stub: StubServer) -> None:
    process, owner = _run_mid_command(stub)
    process.kill()
    process.wait(timeout=30)
    assert owned_by(process.pid) != []  # nothing could answer SIGKILL: the container runs on

    async def next_run() -> None:
        env = TerminalEnvironment(HELLO)
        episode = await env.start(env.tasks()[0], 0)
        await episode.close()

    asyncio.run(next_run())
    assert owned_by(process.pid) == []
    assert labelled("volume", owner) == [] and labelled("image", owner) == []
    folders = list((TerminalEnvironment(HELLO).containers.folders).glob("*"))
    assert not [f for f in folders if (f / "owner").read_text().strip() == owner]
