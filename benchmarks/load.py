"""Many concurrent episodes in one process under the default settings: do they all finish?

Each episode is a `create_turnbon_agent` loop at N=4 against the loopback stub, every call
answering after `--latency` (50 ms): three tool turns that need the selector (the four
candidates differ), then a unanimous answer, so 19 calls an episode. All episodes start
at once and share one engine, as `turnbon bench` runs them. A ticker task measures the
event loop's lag (how late a 10 ms sleep wakes). Each size runs in a fresh process, so the
peak RSS is that size's own.

    python benchmarks/load.py                          # 100, 500, 1000 episodes, defaults
    python benchmarks/load.py --episodes 1000 --max-concurrency none --timeout 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def child(base_url: str, episodes: int, options: dict[str, Any]) -> dict[str, Any]:
    from langchain_core.tools import tool

    from turnbon_graph import TurnEngine
    from turnbon_graph.graph import agent_graph

    @tool
    def step(note: str) -> str:
        """Record a step."""
        return f"noted {note}"

    engine = TurnEngine.from_options(
        "openai/stub",
        n=4,
        completion_kwargs={"api_base": base_url, "api_key": "sk-load"},
        **options,
    )
    agent = agent_graph(engine, [step], max_turns=10).compile()
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - started - 0.01)

    async def one(i: int) -> str | None:
        try:
            await agent.ainvoke({"messages": [("user", f"episode {i}")]})
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:300]
        return None

    async def main() -> tuple[list[str | None], float]:
        tick = asyncio.create_task(ticker())
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(one(i) for i in range(episodes)))
        wall = time.perf_counter() - started
        tick.cancel()
        return outcomes, wall

    outcomes, wall = asyncio.run(main())
    errors = [o for o in outcomes if o is not None]
    lags.sort()
    return {
        "episodes": episodes,
        "completed": episodes - len(errors),
        "failed": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": wall,
        "lag_p50_s": statistics.median(lags) if lags else 0.0,
        "lag_p99_s": lags[int(0.99 * (len(lags) - 1))] if lags else 0.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def serve_stub(latency: float) -> Any:
    from turnbon_graph.testing import (
        CapturedRequest,
        StubResponse,
        StubServer,
        chat_completion,
        is_selector_request,
        tool_call,
    )

    counter = iter(range(10**9))

    def respond(request: CapturedRequest) -> StubResponse:
        if is_selector_request(request):
            body = chat_completion(json.dumps({"reason": "load", "selected_index": 0}))
        else:
            done = sum(m.get("role") == "tool" for m in (request.body or {}).get("messages", []))
            if done >= 3:
                body = chat_completion("done")
            else:
                args = {"note": f"{next(counter)}"}  # distinct: every tool turn needs a selector
                body = chat_completion(tool_calls=[tool_call("step", args)])
        return StubResponse(body=body, delay=latency)

    stub = StubServer()
    stub.script(respond)
    return stub


def options_of(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name in ("max_concurrency", "timeout"):
        value = getattr(args, name)
        if value is not None:
            options[name] = None if value == "none" else float(value)
    if "max_concurrency" in options and options["max_concurrency"] is not None:
        options["max_concurrency"] = int(options["max_concurrency"])
    return options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per stub answer")
    parser.add_argument(
        "--max-concurrency", help="a number or 'none' (default: the library's default)"
    )
    parser.add_argument("--timeout", help="seconds or 'none' (default: the library's default)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        base_url, episodes = args.child.split("|")
        print(json.dumps(child(base_url, int(episodes), options_of(args))))
        return
    options = options_of(args)
    print(f"N=4, {args.latency * 1000:.0f} ms a call, options {options or 'defaults'}")
    print("episodes  completed  failed   wall s   lag p50 ms   lag p99 ms   peak RSS MiB")
    with serve_stub(args.latency) as stub:
        for episodes in args.episodes:
            command = [sys.executable, __file__, "--child", f"{stub.base_url}|{episodes}"]
            for name in ("max_concurrency", "timeout"):
                value = getattr(args, name)
                if value is not None:
                    command += [f"--{name.replace('_', '-')}", value]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{row['episodes']:8}  {row['completed']:9}  {row['failed']:6}  "
                f"{row['wall_s']:7.1f}  {row['lag_p50_s'] * 1000:11.1f}  "
                f"{row['lag_p99_s'] * 1000:11.1f}  {row['peak_rss_mib']:13.0f}"
            )
            if row["first_error"]:
                print(f"          first error: {row['first_error']}")


if __name__ == "__main__":
    main()
