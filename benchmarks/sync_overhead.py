"""What the sync entry points cost over the async ones: the same agent episode through
`invoke` and through `ainvoke`, on the loopback stub.

The sync nodes run the engine's coroutine through `run_sync` (on one background event
loop for the process). Each round runs one episode each way, in alternating order, so
drift on a shared machine hits both sides; the script reports the per-round ratio
sync / async (median and quartiles) and the extra milliseconds per turn. LiteLLM's
logging worker warns when it moves between the two loops; the script silences that.

    python benchmarks/sync_overhead.py                 # N=4, 3 tool turns, 20 ms, 15 rounds
    python benchmarks/sync_overhead.py --latency 0 --rounds 30
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from turn_latency import scripted  # benchmarks/ is on sys.path when run as a script

from turnbon_graph import create_turnbon_agent, turn_record
from turnbon_graph.testing import StubServer


@tool
def shell(command: str) -> str:
    """Pretend to run a shell command."""
    return f"ran {command}"


def main(n: int, turns: int, latency: float, rounds: int) -> None:
    for noisy in ("LiteLLM", "asyncio"):  # "event loop changed", "Task was destroyed"
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    loop = asyncio.new_event_loop()  # the async side's one long-lived loop
    with StubServer() as stub:
        stub.script(scripted(latency))
        agent = create_turnbon_agent(
            "openai/stub",
            [shell],
            n=n,
            seed=0,
            max_turns=turns,
            completion_kwargs={"api_base": stub.base_url, "api_key": "sk-bench"},
        ).compile()
        inputs = {"messages": [HumanMessage("Find the failing test and fix it.")]}

        def check(out: dict[str, Any]) -> None:
            records = [r for m in out["messages"] if (r := turn_record(m)) is not None]
            assert len(records) == turns and all(r.n_ok == n for r in records)

        def run_sync() -> None:
            check(agent.invoke(inputs))

        def run_async() -> None:
            check(loop.run_until_complete(agent.ainvoke(inputs)))

        def seconds(run: Callable[[], None]) -> float:
            started = time.perf_counter()
            run()
            return time.perf_counter() - started

        run_sync(), run_async()  # warm-up: LiteLLM's import and first clients
        sync_s, async_s = [], []
        for i in range(rounds):
            if i % 2:
                async_s.append(seconds(run_async))
                sync_s.append(seconds(run_sync))
            else:
                sync_s.append(seconds(run_sync))
                async_s.append(seconds(run_async))
    loop.close()

    ratios = [s / a for s, a in zip(sync_s, async_s, strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    extra_ms = [(s - a) / turns * 1000 for s, a in zip(sync_s, async_s, strict=True)]
    print(f"N={n}, {turns} tool turns per episode, stub latency {latency * 1000:.0f} ms,")
    print(f"{rounds} interleaved rounds\n")
    print("| measure | value |")
    print("|---|---|")
    print(f"| async episode, median | {statistics.median(async_s):.3f} s |")
    print(f"| sync episode, median | {statistics.median(sync_s):.3f} s |")
    print(f"| ratio sync / async, median [quartiles] | {median:.2f}x [{q1:.2f}, {q3:.2f}] |")
    print(f"| extra per turn, median | {statistics.median(extra_ms):.1f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--turns", type=int, default=3, help="tool turns per episode")
    parser.add_argument("--latency", type=float, default=0.02, help="stub latency in seconds")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    main(args.n, args.turns, args.latency, args.rounds)
