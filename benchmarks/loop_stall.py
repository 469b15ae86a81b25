"""The longest event-loop stall during a fresh process's first turn, before and after
LiteLLM moved off the loop.

Each measurement is a fresh interpreter (LiteLLM not yet imported) that runs a ticker task
(a 1 ms sleep in a loop, recording the largest gap between wake-ups) beside the first N=4
turn of a graph on the loopback stub. "on the loop" imports LiteLLM inside a coroutine
first, as the library did before (`import litellm` on the first call); "off the loop" is
the library as it is (`client.load_litellm` imports it in a thread). Rounds alternate, and
the ratio is taken in one run (shared machines are noisy: compare ratios, not seconds).

    python benchmarks/loop_stall.py               # 3 rounds of each
    python benchmarks/loop_stall.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from turnbon_graph.testing import StubServer, chat_completion, is_selector_request

CHILD = """
import asyncio, sys, time
from turnbon_graph import create_turnbon_graph

graph = create_turnbon_graph(
    "openai/stub", n=4, completion_kwargs={"api_base": sys.argv[1], "api_key": "sk-bench"}
).compile()
worst = 0.0


async def ticker() -> None:
    global worst
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        worst = max(worst, now - last)
        last = now


async def main() -> None:
    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    if sys.argv[2] == "on":
        import litellm  # noqa: F401  (what the first call did before)
    await graph.ainvoke({"messages": [("user", "go")]})
    tick.cancel()


asyncio.run(main())
print(worst)
"""


def stall(base_url: str, mode: str) -> float:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, base_url, mode],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each (default 3)")
    args = parser.parse_args()
    with StubServer() as stub:
        stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 0})))
        stub.script(chat_completion("a"), chat_completion("b"))
        samples: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(args.rounds):
            for mode in ("on", "off"):
                samples[mode].append(stall(stub.base_url, mode))
    on, off = statistics.median(samples["on"]), statistics.median(samples["off"])
    for mode, label in (("on", "on the loop (before)"), ("off", "off the loop (now)")):
        values = ", ".join(f"{v * 1000:.0f}" for v in samples[mode])
        print(
            f"{label:22} longest stall, median {statistics.median(samples[mode]) * 1000:7.0f} ms"
            f"  (rounds: {values} ms)"
        )
    print(f"ratio now / before: {off / on:.3f}")


if __name__ == "__main__":
    main()
