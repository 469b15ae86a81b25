"""Requests per second of `turnbon serve` with 1 and with 2 worker processes, in one run.

The stub (a process of its own, answering in `--latency` seconds, honouring `n`) stands
for the upstream model; each round starts `turnbon serve --workers K` for K = 1 and 2 (in
alternating order), sends `--requests` chat completions (N=4 turns) with `--concurrency`
in flight from one asyncio client, and times them. The ratio of the two rates is taken
within each round: the machine is shared (and the client and the stub share it too), so
compare the ratio, not the rates.

    python benchmarks/serve_workers.py                   # 5 rounds of 400 requests, 64 at once
    python benchmarks/serve_workers.py --rounds 3 --requests 200
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from child_process import Process  # beside this script

HERE = Path(__file__).resolve().parent
MESSAGES = [{"role": "user", "content": "Find the failing test and fix it."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(upstream: str, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "turnbon_graph.cli", "serve", "--model", "openai/gpt-4o-mini"]
    command += ["--api-base", upstream, "-n", "4", "--port", str(port), "--workers", str(workers)]
    command += ["-o", "max_concurrency=256"]
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    pids: set[int] = set()
    while len(pids) < workers:  # every worker up (each answers /health in its turn)
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"turnbon serve --workers {workers} did not start")
        try:
            pids.add(httpx.get(f"{base}/health", timeout=5).json()["pid"])
        except httpx.TransportError:
            time.sleep(0.1)
    return process, base


async def drive(base: str, requests: int, concurrency: int) -> float:
    """Requests per second of `requests` chat completions, `concurrency` at a time."""
    body = {"model": "turnbon", "messages": MESSAGES, "tools": TOOLS}
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=f"{base}/v1", timeout=120, limits=limits) as client:
        for _ in range(8):  # warm-up: each worker's first turn imports and connects
            (await client.post("/chat/completions", json=body)).raise_for_status()
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                (await client.post("/chat/completions", json=body)).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return requests / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per stub answer")
    args = parser.parse_args()
    stub = Process([sys.executable, str(HERE / "turn_cpu.py"), "--serve", str(args.latency)])
    upstream = stub.first_line()
    rates: dict[int, list[float]] = {1: [], 2: []}
    ratios = []
    try:
        for number in range(args.rounds):
            for workers in (1, 2) if number % 2 == 0 else (2, 1):
                stub.ask("reset")
                process, base = start_server(upstream, workers)
                try:
                    rates[workers].append(asyncio.run(drive(base, args.requests, args.concurrency)))
                finally:
                    process.terminate()
                    process.wait(timeout=60)
            ratios.append(rates[2][-1] / rates[1][-1])
    finally:
        stub.close()
    print(
        f"turnbon serve, N=4 turns, stub at {args.latency * 1000:.0f} ms, {args.rounds} rounds "
        f"of {args.requests} requests ({args.concurrency} at once), load "
        f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    for workers, values in rates.items():
        print(f"{workers} worker(s): median {statistics.median(values):.1f} requests/s")
    print(
        f"2 workers / 1: {statistics.median(ratios):.2f}x "
        f"(rounds from {min(ratios):.2f}x to {max(ratios):.2f}x)"
    )


if __name__ == "__main__":
    main()
