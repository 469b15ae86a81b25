"""What `turnbon serve` costs per turn over calling the engine in-process: the same N=4
turn (4 candidates and a selector call on the loopback stub, at a fixed latency) through
`TurnEngine.run` and through the server with the official OpenAI SDK.

The server runs on a background thread (uvicorn, its own loop) with its own engine of the
same configuration. Each round runs one turn each way, in alternating order, so drift on
a shared machine hits both sides; the script reports the per-round ratio server /
in-process (median and quartiles) and the extra milliseconds per turn: HTTP, JSON both
ways and the translation of `turnbon_graph.openai`.

    python benchmarks/serve_overhead.py                  # N=4, 50 ms, 30 rounds
    python benchmarks/serve_overhead.py --latency 0 --rounds 60
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.messages import HumanMessage
from openai import OpenAI
from turn_latency import scripted  # benchmarks/ is on sys.path when run as a script

from turnbon_graph.config import turn_config
from turnbon_graph.serve import BackgroundServer, ServeConfig
from turnbon_graph.testing import StubServer
from turnbon_graph.turn.engine import TurnEngine, turn_record

TASK = "Find the failing test and fix it."
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


def main(n: int, latency: float, rounds: int) -> None:
    for noisy in ("LiteLLM", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    loop = asyncio.new_event_loop()  # the in-process side's one long-lived loop
    with StubServer() as stub:
        stub.script(scripted(latency))
        turn = turn_config(
            n=n, seed=0, completion_kwargs={"api_base": stub.base_url, "api_key": "sk-bench"}
        )
        engine = TurnEngine.from_config("openai/stub", turn)
        with BackgroundServer(ServeConfig(model="openai/stub", turn=turn)) as server:
            client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)

            def in_process() -> None:
                message = loop.run_until_complete(engine.run([HumanMessage(TASK)], tools=TOOLS))
                record = turn_record(message)
                assert record is not None and record.n_ok == n

            def served() -> None:
                response = client.chat.completions.create(
                    model="turnbon",
                    messages=[{"role": "user", "content": TASK}],
                    tools=TOOLS,  # type: ignore[arg-type]
                )
                assert (response.model_extra or {})["turnbon"]["n_ok"] == n

            def seconds(run: Callable[[], None]) -> float:
                started = time.perf_counter()
                run()
                return time.perf_counter() - started

            in_process(), served()  # warm-up: LiteLLM's import and first clients
            local_s, served_s = [], []
            for i in range(rounds):
                if i % 2:
                    served_s.append(seconds(served))
                    local_s.append(seconds(in_process))
                else:
                    local_s.append(seconds(in_process))
                    served_s.append(seconds(served))
    pending = asyncio.all_tasks(loop)  # LiteLLM's logging worker
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()

    ratios = [s / a for s, a in zip(served_s, local_s, strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    extra_ms = [(s - a) * 1000 for s, a in zip(served_s, local_s, strict=True)]
    e1, extra, e3 = statistics.quantiles(extra_ms, n=4)
    print(f"N={n} + selector per turn, stub latency {latency * 1000:.0f} ms, ", end="")
    print(f"{rounds} interleaved rounds\n")
    print("| measure | value |")
    print("|---|---|")
    print(f"| in-process turn (TurnEngine.run), median | {statistics.median(local_s):.3f} s |")
    served_median = statistics.median(served_s)
    print(f"| served turn (OpenAI SDK -> turnbon serve), median | {served_median:.3f} s |")
    print(f"| ratio served / in-process, median [quartiles] | {median:.3f}x [{q1:.3f}, {q3:.3f}] |")
    print(f"| extra per turn, median [quartiles] | {extra:.1f} ms [{e1:.1f}, {e3:.1f}] |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05, help="stub latency in seconds")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    main(args.n, args.latency, args.rounds)
