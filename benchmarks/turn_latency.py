"""How long one Turn-BoN turn takes against a single call, on the loopback stub.

Every stub response waits `--latency` seconds (300 ms by default), generator and selector
alike. The turn is N parallel generator calls plus one selector call, so its ideal time
is one generator latency plus one selector latency; this script reports the measured
ratio to that, with everything measured in one run (shared machines are noisy, so
compare ratios, not seconds).

    python benchmarks/turn_latency.py            # N=8, 300 ms, 5 repeats
    python benchmarks/turn_latency.py --n 16 --repeats 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.messages import HumanMessage

from turnbon_graph import TurnEngine, turn_record
from turnbon_graph.selectors import FirstSelector, LLMSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

ASK = [HumanMessage("Find the failing test and fix it.")]


def scripted(latency: float) -> Callable[[CapturedRequest], StubResponse]:
    counter = iter(range(10**9))

    def respond(request: CapturedRequest) -> StubResponse:
        if is_selector_request(request):
            body = chat_completion(json.dumps({"reason": "bench", "selected_index": 0}))
        else:
            command = f"pytest -k case{next(counter)}"  # distinct: never unanimous
            body = chat_completion(tool_calls=[tool_call("shell", {"command": command})])
        return StubResponse(body=body, delay=latency)

    return respond


async def timed(run: Callable[[], Awaitable[Any]], repeats: int) -> list[float]:
    await run()  # warm-up: LiteLLM's first call builds clients and caches
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await run()
        samples.append(time.perf_counter() - started)
    return samples


async def main(n: int, latency: float, repeats: int) -> None:
    with StubServer() as stub:
        stub.script(scripted(latency))
        endpoint = {"api_base": stub.base_url, "api_key": "sk-bench"}
        single = TurnEngine.from_options(
            "openai/stub", n=1, selector=FirstSelector(), completion_kwargs=endpoint
        )
        selector = LLMSelector("openai/stub", completion_kwargs=endpoint, seed=0)
        turn = TurnEngine.from_options(
            "openai/stub", n=n, selector=selector, completion_kwargs=endpoint, seed=0
        )

        async def one_call() -> Any:
            return await single.run(ASK)

        pool = (await turn.generate(ASK)).ok

        async def one_selection() -> Any:
            return await selector.select(ASK, pool)

        async def one_turn() -> Any:
            message = await turn.run(ASK)
            record = turn_record(message)
            assert record is not None and record.n_ok == n and record.fallback is None
            return message

        call = statistics.median(await timed(one_call, repeats))
        selection = statistics.median(await timed(one_selection, repeats))
        turns = await timed(one_turn, repeats)
        median_turn = statistics.median(turns)

    ideal = call + selection
    print(f"N={n}, stub latency {latency * 1000:.0f} ms, {repeats} repeats (medians)\n")
    print("| measure | seconds | ratio to single call + selector call |")
    print("|---|---|---|")
    print(f"| single generator call | {call:.3f} | |")
    print(f"| selector call | {selection:.3f} | |")
    print(f"| Turn-BoN turn (N={n} + selector) | {median_turn:.3f} | {median_turn / ideal:.2f}x |")
    print(f"| slowest turn | {max(turns):.3f} | {max(turns) / ideal:.2f}x |")
    print(f"\nSequential calls would take {(n + 1) * latency:.1f} s; ideal is {ideal:.3f} s.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.3, help="stub latency in seconds")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.latency, args.repeats))
