"""How long `turnbon serve` keeps other requests waiting while it reads a large body, and
what large bodies leave in its memory.

`turnbon serve --model stub -n 2 --max-body-mb 32` runs in a process of its own. For
each endpoint a body of 90,000 short messages (about 9.7 MiB) is sent while a second
connection asks `GET /health` over and over; the longest `/health` wait is taken as a
fraction of the large request's own time, within each round (shared machines are noisy:
compare ratios, not seconds). "refused" ends in a message of a role no API knows, so the
body is read whole (parsed, checked, converted) and refused with no turn; "answered" is a
whole turn on the stub (its upstream calls included). "continued" is a request of a few
bytes whose `previous_response_id` continues a stored conversation of 80,000 items: the
work is the conversation's, not the body's. Then `--memory` requests of 2 MiB are
answered, and the server's resident memory is read after each.

    python benchmarks/serve_large_body.py               # 3 rounds, 20 requests for memory
    python benchmarks/serve_large_body.py --rounds 5 --memory 30
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ITEMS = 90_000
CONTINUED_ITEMS = 80_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "turnbon_graph.cli", "serve", "--model", "stub"]
    command += ["-n", "2", "--port", str(port), "--log-level", "warning"]
    command += ["--max-body-mb", "32"]  # a continued 80,000-item conversation is ~12 MiB
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("turnbon serve --model stub did not start")
        try:
            httpx.get(f"{base}/health", timeout=5)
            return process, base
        except httpx.TransportError:
            time.sleep(0.1)


def large_body(endpoint: str, refused: bool, count: int = ITEMS) -> bytes:
    items: list[dict[str, Any]] = [{"role": "user", "content": "x" * 80}] * count
    if refused:
        items = [*items, {"role": "narrator", "content": "the end"}]
    field = "messages" if endpoint == "chat/completions" else "input"
    return json.dumps({"model": "turnbon", field: items}).encode()


def continuing(base: str) -> bytes:
    """A few bytes continuing a stored conversation of `CONTINUED_ITEMS` items."""
    stored = httpx.post(
        f"{base}/v1/responses",
        content=large_body("responses", False, CONTINUED_ITEMS),
        timeout=600,
    )
    stored.raise_for_status()
    body = {"model": "turnbon", "input": "And now?", "previous_response_id": stored.json()["id"]}
    return json.dumps(body).encode()


def stall(base: str, endpoint: str, body: bytes) -> tuple[float, float]:
    """(the longest /health wait, the large request's time) in seconds."""
    sent: dict[str, float] = {}

    def send() -> None:
        started = time.monotonic()
        answer = httpx.post(f"{base}/v1/{endpoint}", content=body, timeout=600)
        sent["took"] = time.monotonic() - started
        sent["status"] = answer.status_code

    waits = []
    with httpx.Client(timeout=600) as client:
        client.get(f"{base}/health")
        sender = threading.Thread(target=send)
        sender.start()
        while sender.is_alive():
            started = time.monotonic()
            client.get(f"{base}/health")
            waits.append(time.monotonic() - started)
        sender.join()
    expected = 400 if b'"narrator"' in body else 200
    if sent["status"] != expected:
        raise RuntimeError(f"the request got {sent['status']}, not {expected}")
    return max(waits), sent["took"]


def resident_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory", type=int, default=20, help="2 MiB requests answered")
    args = parser.parse_args()
    process, base = start_server()
    try:
        print(
            f"turnbon serve --model stub -n 2, {time.strftime('%Y-%m-%d %H:%M')}, "
            f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
        )
        cases = [
            (endpoint, "refused" if refused else "answered", large_body, (endpoint, refused))
            for endpoint in ("chat/completions", "responses")
            for refused in (True, False)
        ]
        # stored just before it is continued: the other cases' answers fill the store
        cases.append(("responses", "continued", continuing, (base,)))
        for endpoint, case, make, made_of in cases:
            body = make(*made_of)  # type: ignore[operator]
            results = [stall(base, endpoint, body) for _ in range(args.rounds)]
            ratios = [wait / took for wait, took in results]
            print(
                f"{endpoint:17} {case:9} "
                f"{len(body) / 2**20:.1f} MiB: longest /health wait / request time "
                f"{statistics.median(ratios):.3f} (rounds {min(ratios):.3f} to "
                f"{max(ratios):.3f}; request {statistics.median(t for _, t in results):.2f} s, "
                f"wait {statistics.median(w for w, _ in results):.3f} s)"
            )
        text = {"role": "user", "content": "x" * 2**21}
        small = json.dumps({"model": "turnbon", "messages": [text]}).encode()
        resident = []
        for _ in range(args.memory):
            httpx.post(f"{base}/v1/chat/completions", content=small, timeout=600)
            resident.append(resident_mb(process.pid))
        print(f"resident MB after each of {args.memory} answered 2 MiB requests: {resident}")
    finally:
        process.terminate()
        process.wait(timeout=60)


if __name__ == "__main__":
    main()
