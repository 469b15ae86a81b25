"""`turnbon serve` guards itself: a body over the limit is a 413 before it is read (and
before any upstream call), a body nested too deep a 400, a connection that sends partial
headers is closed; and `turnbon serve --model stub` answers offline, through the real
command and the official OpenAI SDK."""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.helpers import terminate
from turnbon_graph.config import turn_config
from turnbon_graph.serve import BackgroundServer, ServeConfig
from turnbon_graph.serve.limits import PROTOCOLS, json_depth
from turnbon_graph.testing import StubServer, chat_completion

BODY_MB = 20
"""The oversized body of these tests: twice the default limit."""
MESSAGES: list[Any] = [{"role": "user", "content": "what next?"}]
SERVE = [sys.executable, "-m", "turnbon_graph.cli", "serve"]


def serve_config(stub: StubServer, **fields: Any) -> ServeConfig:
    turn = turn_config(n=2, seed=0, completion_kwargs={"api_base": stub.base_url, "api_key": "x"})
    return ServeConfig(model="openai/stub", turn=turn, **fields)


@pytest.fixture
def server(stub: StubServer) -> Iterator[BackgroundServer]:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


def big_body(megabytes: int = BODY_MB) -> Iterator[bytes]:
    """A chat body of `megabytes` MiB, made as it is sent (the client holds 64 KiB)."""
    piece = b"x" * 65536
    yield b'{"model": "turnbon", "messages": [{"role": "user", "content": "'
    for _ in range(megabytes * 16):
        yield piece
    yield b'"}]}'


def assert_still_answers(server: BackgroundServer, stub: StubServer) -> None:
    stub.script(chat_completion("still here"))
    client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    answer = client.chat.completions.create(model="turnbon", messages=MESSAGES)
    assert answer.choices[0].message.content == "still here"


# ---------------------------------------------------------------------- the body


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_20_mb_body_is_a_413_and_never_reaches_upstream(
    stub: StubServer, server: BackgroundServer, framing: str
) -> None:
    url = f"{server.base_url}/chat/completions"
    if framing == "content-length":
        response = httpx.post(url, content=b"".join(big_body()), timeout=60)
    else:  # no Content-Length: counted as it streams
        response = httpx.post(url, content=big_body(), timeout=60)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "request_too_large"
    assert "10,485,760 bytes" in error["message"]
    assert stub.requests == []  # refused before any turn started
    assert_still_answers(server, stub)


def test_the_sdk_sees_the_413_as_an_api_status_error(
    stub: StubServer, server: BackgroundServer
) -> None:
    client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    huge = "x" * (BODY_MB * 1024 * 1024)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(
            model="turnbon", messages=[{"role": "user", "content": huge}]
        )
    assert caught.value.status_code == 413
    assert stub.requests == []


def test_the_limit_is_the_configured_one(stub: StubServer) -> None:
    stub.script(chat_completion("fits"))
    config = serve_config(stub, max_body_bytes=4096)
    with BackgroundServer(config) as server:
        url = f"{server.base_url}/chat/completions"
        small = {"messages": [{"role": "user", "content": "x" * 3000}]}
        assert httpx.post(url, json=small).status_code == 200
        large = {"messages": [{"role": "user", "content": "x" * 5000}]}
        response = httpx.post(url, json=large)
        assert response.status_code == 413 and "4,096 bytes" in response.text


def test_json_nested_100000_deep_is_a_400_not_a_recursion_error(
    stub: StubServer, server: BackgroundServer
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    response = httpx.post(f"{server.base_url}/chat/completions", content=deep)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "nested_too_deep"
    assert error["message"] == "the request body is nested deeper than 64 levels"
    assert stub.requests == []
    assert_still_answers(server, stub)


def test_a_tool_schema_nested_past_the_bound_is_refused_and_one_within_it_is_not(
    stub: StubServer, server: BackgroundServer
) -> None:
    def body(levels: int) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        for _ in range(levels):
            schema = {"type": "object", "properties": {"x": schema}}
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        return {"model": "turnbon", "messages": MESSAGES, "tools": [tool]}

    stub.script(chat_completion("fine"))
    url = f"{server.base_url}/chat/completions"
    assert httpx.post(url, json=body(20)).status_code == 200
    assert httpx.post(url, json=body(40)).status_code == 400


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert json_depth(b'"plain"') == 0
    assert json_depth(b'{"a": [1, {"b": []}]}') == 4
    assert json_depth(b'{"text": "[[[[{{{{ \\" ]]]] \\\\"}') == 1
    assert json_depth(b"[" * 100_000 + b"]" * 100_000) == 100_000
    assert json_depth(b'["unterminated [[[') == 1


def test_a_body_of_unterminated_strings_is_refused_in_one_pass(
    stub: StubServer, server: BackgroundServer
) -> None:
    # each quote begins a string that never ends: a scan that looked for the closing
    # quote from every one would take hours on these 2 MB
    response = httpx.post(f"{server.base_url}/chat/completions", content=b'"' + b'\\"' * 10**6)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


# ---------------------------------------------------------------------- the connection


@contextmanager
def connection(server: BackgroundServer) -> Iterator[socket.socket]:
    """A raw connection to the server; a read waits at most a generous minute."""
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        conn.settimeout(60)
        yield conn


def until_closed(conn: socket.socket) -> bytes:
    """What the server sends until it closes the connection (the test fails if it
    keeps it open)."""
    got = b""
    try:
        while part := conn.recv(65536):
            got += part
    except ConnectionResetError:  # closed with our bytes unread
        pass
    except TimeoutError:
        pytest.fail("the server kept the connection open")
    return got


HTTP = sorted(PROTOCOLS)
"""uvicorn's HTTP protocols here: h11, and httptools where uvicorn[standard] is installed."""


@pytest.mark.parametrize("http", HTTP)
@pytest.mark.parametrize(
    "sent",
    [
        b"POST /v1/chat/compl",  # a partial request line
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty",  # partial headers
        b"",  # nothing at all
    ],
    ids=["request-line", "headers", "nothing"],
)
def test_a_connection_that_sends_partial_headers_is_closed(
    stub: StubServer, sent: bytes, http: str
) -> None:
    with BackgroundServer(serve_config(stub, header_timeout_s=0.5, http=http)) as server:
        with connection(server) as conn:
            conn.sendall(sent)
            assert until_closed(conn) == b""
        assert httpx.get(f"{server.base_url.removesuffix('/v1')}/health").status_code == 200


@pytest.mark.parametrize("http", HTTP)
def test_a_partial_second_request_on_a_kept_alive_connection_is_closed(
    stub: StubServer, http: str
) -> None:
    config = serve_config(stub, header_timeout_s=0.5, idle_timeout_s=600, http=http)
    with BackgroundServer(config) as server, connection(server) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET /heal")  # and then nothing: not the idle timeout's to close
        assert until_closed(conn) == b""


@pytest.mark.parametrize("http", HTTP)
def test_headers_larger_than_the_limit_close_the_connection(stub: StubServer, http: str) -> None:
    config = serve_config(stub, max_header_bytes=4096, header_timeout_s=600, http=http)
    with BackgroundServer(config) as server, connection(server) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        with suppress(BrokenPipeError, ConnectionResetError):  # closed while we send
            for _ in range(64):  # headers that never end, 1 KiB at a time
                conn.sendall(b"X-Pad: " + b"a" * 1024 + b"\r\n")
        got = until_closed(conn)
        assert got == b"" or got.startswith((b"HTTP/1.1 431", b"HTTP/1.1 400"))


@pytest.mark.parametrize("http", HTTP)
def test_a_whole_header_block_over_the_limit_in_one_read_gets_a_431(
    stub: StubServer, http: str
) -> None:
    config = serve_config(stub, max_header_bytes=4096, header_timeout_s=600, http=http)

    def pad(lines: int) -> bytes:
        return b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(lines))

    with BackgroundServer(config) as server, connection(server) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + pad(8) + b"\r\n")  # complete
        assert until_closed(conn).startswith(b"HTTP/1.1 431")
    with BackgroundServer(config) as server, connection(server) as conn:  # under it: served
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + pad(2) + b"\r\n")
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")


def test_the_idle_timeout_closes_a_kept_alive_connection_that_another_server_keeps(
    stub: StubServer,
) -> None:
    brief = BackgroundServer(serve_config(stub, idle_timeout_s=1))
    patient = BackgroundServer(serve_config(stub, idle_timeout_s=600))
    request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with brief, patient, connection(brief) as closing, connection(patient) as kept:
        for conn in (closing, kept):
            conn.sendall(request)
            assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        assert until_closed(closing) == b""  # idle past --idle-timeout: closed
        kept.sendall(request)  # idle as long, and still open under its longer timeout
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("http", HTTP)
def test_a_body_that_stalls_gets_a_408_and_the_connection_is_closed(
    stub: StubServer, http: str
) -> None:
    config = serve_config(stub, body_timeout_s=0.5, http=http)
    with BackgroundServer(config) as server, connection(server) as conn:
        conn.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model"'
        )  # 9 of the 100 bytes it said, then nothing
        answer = until_closed(conn)
    assert answer.startswith(b"HTTP/1.1 408")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert stub.requests == []  # nothing went upstream


# ---------------------------------------------------------------------- the command


class ServeCommand:
    """`turnbon serve ARGS --port 0` in a process of its own: its port read from
    uvicorn's startup line (at --log-level info), its output kept."""

    def __init__(self, *args: str) -> None:
        command = [*SERVE, *args, "--port", "0"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._port: int | None = None
        self._started = threading.Event()
        for stream, lines in (
            (self.process.stdout, self.stdout),
            (self.process.stderr, self.stderr),
        ):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    def _read(self, stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)
            if "Uvicorn running on http://" in line:
                self._port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
                self._started.set()
        self._started.set()  # the process ended

    @property
    def base_url(self) -> str:
        self._started.wait(timeout=300)
        assert self._port is not None, "".join(self.stderr)
        return f"http://127.0.0.1:{self._port}/v1"

    def stop(self) -> int:
        return terminate(self.process)

    def peak_rss_kb(self) -> int:
        """The server process's peak resident memory (VmHWM), in KiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1])


@pytest.fixture(scope="module")
def stub_command() -> Iterator[ServeCommand]:
    command = ServeCommand("--model", "stub", "-n", "3", "--seed", "1")
    try:
        command.base_url  # noqa: B018 - started
        yield command
    finally:
        command.stop()


def test_serve_model_stub_answers_offline_through_the_sdk(stub_command: ServeCommand) -> None:
    client = OpenAI(base_url=stub_command.base_url, api_key="none", max_retries=0)
    answer = client.chat.completions.create(model="turnbon", messages=MESSAGES)
    content = answer.choices[0].message.content or ""
    assert content.startswith("Stub draft ") and content.endswith(" of 3. You said: what next?")
    record = answer.model_extra["turnbon"]  # type: ignore[index]
    assert record["n_requested"] == 3 and record["n_ok"] == 3
    assert record["selector"] in ("llm:openai/stub", "unanimous")
    assert answer.usage is not None and answer.usage.total_tokens > 0
    models = client.models.list()
    assert [m.id for m in models.data] == ["turnbon"]


def test_the_stub_answers_what_the_serve_page_shows() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text()
    shown = re.search(
        r"^```bash\n\.venv/bin/turnbon serve (--model stub [^\n]*) --port 8000\n```\n"
        r".*?Asked `([^`]*)` as its first chat completion, it answers:\n\n```text\n([^\n]*)\n```"
        r".*?`usage.total_tokens` is (\d+)",
        page,
        re.DOTALL | re.MULTILINE,
    )
    assert shown is not None
    flags, asked, answer, tokens = shown.groups()
    command = ServeCommand(*shlex.split(flags))
    try:
        client = OpenAI(base_url=command.base_url, api_key="none", max_retries=0)
        response = client.chat.completions.create(
            model="turnbon", messages=[{"role": "user", "content": asked}]
        )
    finally:
        command.stop()
    assert response.choices[0].message.content == answer
    assert response.model_extra["turnbon"]["selector"] == "llm:openai/stub"  # type: ignore[index]
    assert response.usage is not None and response.usage.total_tokens == int(tokens)


def test_the_stubs_drafts_are_counted_out_of_the_turns_n() -> None:
    """`--model stub -n 4`: every candidate is a draft "of 4", numbered 1 to 4 (they were
    drafts 1 to 3 "of 3", whatever N was)."""
    command = ServeCommand("--model", "stub", "-n", "4", "--seed", "1")
    try:
        client = OpenAI(base_url=command.base_url, api_key="none", max_retries=0)
        answers = [
            client.chat.completions.create(model="turnbon", messages=MESSAGES) for _ in range(3)
        ]
    finally:
        command.stop()
    drafts = []
    for answer in answers:
        record = answer.model_extra["turnbon"]  # type: ignore[index]
        assert record["n_requested"] == 4
        texts = [answer.choices[0].message.content or ""]
        texts += [candidate["content"] for candidate in record["candidates"]]
        for text in texts:
            found = re.fullmatch(r"Stub draft (\d+) of (\d+)\. You said: what next\?", text)
            assert found is not None and found[2] == "4", text
            drafts.append(int(found[1]))
    assert set(drafts) <= {1, 2, 3, 4}


def test_serve_model_stub_streams_through_the_sdk(stub_command: ServeCommand) -> None:
    client = OpenAI(base_url=stub_command.base_url, api_key="none", max_retries=0)
    stream = client.chat.completions.create(model="turnbon", messages=MESSAGES, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.startswith("Stub draft ") and text.endswith("You said: what next?")


def test_the_stub_asks_the_selector_when_candidates_differ(stub_command: ServeCommand) -> None:
    client = OpenAI(base_url=stub_command.base_url, api_key="none", max_retries=0)
    selectors = set()
    for _ in range(6):  # 3 drafts of 3: unanimous only now and then
        answer = client.chat.completions.create(model="turnbon", messages=MESSAGES)
        selectors.add(answer.model_extra["turnbon"]["selector"])  # type: ignore[index]
    assert "llm:openai/stub" in selectors


def test_the_commands_memory_does_not_grow_by_a_refused_body(stub_command: ServeCommand) -> None:
    before = stub_command.peak_rss_kb()
    url = f"{stub_command.base_url}/chat/completions"
    response = httpx.post(url, content=big_body(), timeout=60)
    assert response.status_code == 413
    grown_mb = (stub_command.peak_rss_kb() - before) / 1024
    assert grown_mb < BODY_MB, f"the server's peak memory grew {grown_mb:.0f} MB"


def test_the_command_logs_each_turn_at_info_and_no_access_log(
    stub_command: ServeCommand,
) -> None:
    client = OpenAI(base_url=stub_command.base_url, api_key="none", max_retries=0)
    client.chat.completions.create(model="turnbon", messages=MESSAGES)
    client.chat.completions.create(model="turnbon", messages=MESSAGES)  # the log has the first
    stderr = "".join(stub_command.stderr)
    assert "3/3 candidates" in stderr
    assert "POST /v1/chat/completions" not in "".join(stub_command.stdout) + stderr


def test_access_log_and_log_level_flags() -> None:
    command = ServeCommand("--model", "stub", "-n", "2", "--access-log", "--log-level", "info")
    try:
        client = OpenAI(base_url=command.base_url, api_key="none", max_retries=0)
        client.chat.completions.create(model="turnbon", messages=MESSAGES)
        client.models.list()
    finally:
        assert command.stop() == -signal.SIGTERM
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in "".join(command.stdout)
    assert "3/3 candidates" not in "".join(command.stderr)  # -n 2
    assert "2/2 candidates" in "".join(command.stderr)


def test_log_level_warning_keeps_the_turn_lines_out(stub_command: ServeCommand) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [*SERVE, "--model", "stub", "--log-level", "warning", "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=50)
        answer = client.chat.completions.create(model="turnbon", messages=MESSAGES)
        assert answer.choices[0].message.content
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert "candidates" not in stderr and "Uvicorn running" not in stderr
    assert "turnbon serve: openai/stub (the scripted stub)" in stderr


def test_the_stub_refuses_connection_flags_it_would_ignore() -> None:
    done = subprocess.run(
        [*SERVE, "--model", "stub", "--api-base", "http://127.0.0.1:9/v1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--api-base has no effect with --model stub" in done.stderr


def test_the_limit_flags_and_file_keys_reach_the_server(tmp_path: Path) -> None:
    import argparse
    import dataclasses

    from turnbon_graph.cli.serve import SETTINGS, serve_arguments, serve_config

    defaults = {f.name: f.default for f in dataclasses.fields(ServeConfig)}
    assert SETTINGS["max_body_mb"] * 1024 * 1024 == defaults["max_body_bytes"]
    shared = ("header_timeout_s", "body_timeout_s", "idle_timeout_s")
    assert {k: SETTINGS[k] for k in shared} == {k: defaults[k] for k in shared}

    file = tmp_path / "serve.toml"
    file.write_text('model = "openai/gpt-4o-mini"\nmax_body_mb = 2\nidle_timeout_s = 30\n')
    argv = ["serve", "--config", str(file), "--header-timeout", "3", "--body-timeout", "7"]
    parser = argparse.ArgumentParser()
    serve_arguments(parser)
    args = parser.parse_args(argv[1:])
    args.argv = argv
    config, settings = serve_config(args)
    assert config.max_body_bytes == 2 * 1024 * 1024
    assert (config.idle_timeout_s, config.header_timeout_s, config.body_timeout_s) == (30, 3, 7)
    assert (settings["log_level"], settings["access_log"]) == ("info", False)
