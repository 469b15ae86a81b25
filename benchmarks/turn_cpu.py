"""CPU per N=8 turn (generate + LLM selector): ours, the floors under it, and the peers.

The stub runs in a process of its own; each arm runs in a worker process (ours in this
virtualenv, the peers in `.venv-peers`, made by `make bench-peers`), which measures its
own process time (every thread) and wall time over `--turns` turns. Rounds interleave the
arms, and every ratio is taken within a round against our graph: the machine is shared, so
compare the ratios and their spread, not milliseconds. The model id is
`openai/gpt-4o-mini` (priced in LiteLLM's map) against the stub.

Arms: `graph` (`create_turnbon_graph` with its defaults, no tool execution: one call
with n=8, as the stub honours n, and the selector's), `graph-calls` (the same with
`native_n=False`: a call per candidate, the default before one call became it), `chat`
(`ChatTurnBoN`),
`middleware` (`TurnBoNMiddleware` in `create_agent` with `ChatOpenAI`; the tool returns
directly, so a turn also runs it once), the floors `litellm` (the graph's 9 requests as
bare `litellm.acompletion` calls: `graph-calls`'s), `client` (the same 9 through our
`LiteLLMClient`:
LiteLLM's per-call logging off, no graph), `openai` (the same through the OpenAI SDK),
`aiohttp` (raw), and the peers `its_hub` (`BestOfN` + `LLMJudge`), `dspy` (`BestOfN`),
`optillm` (`bon`), `react` (LangGraph's `create_react_agent`, N=1). A peer that cannot be
imported is skipped with a line saying why.

    python benchmarks/turn_cpu.py                          # ours and the floors
    python benchmarks/turn_cpu.py --peers-python .venv-peers/bin/python   # + the peers
    python benchmarks/turn_cpu.py --scale                  # turns/s at 1..300 episodes,
                                                           # graph against graph-calls
    # the profile behind it (200 turns of the graph, in the worker's process):
    python benchmarks/turn_cpu.py --profile graph --turns 200   # cProfile, top 40
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from child_process import Process, answer  # beside this script

MODEL = "openai/gpt-4o-mini"
N = 8
QUESTION = "Find the failing test and fix it."
OURS = ["graph", "graph-calls", "chat", "middleware", "client", "litellm", "openai", "aiohttp"]
PEERS = ["its_hub", "dspy", "optillm", "react"]
Turn = Callable[[], Awaitable[Any]]


def serve(latency: float) -> None:
    """The stub: tool calls (distinct, `n` choices when asked), selector answers."""
    from turnbon_graph.testing import (
        StubResponse,
        StubServer,
        chat_completion,
        choice,
        is_selector_request,
        tool_call,
    )

    counter = itertools.count()

    def respond(request: Any) -> StubResponse:
        n = int((request.body or {}).get("n") or 1)
        if is_selector_request(request) or not (request.body or {}).get("tools"):
            # Our selector's answer, and a peer's (DSPy's fields, its_hub's judge score).
            text = json.dumps({"reason": "bench", "selected_index": 0, "answer": "42", "score": 5})
            body = chat_completion(choices=[choice(text, index=i) for i in range(n)])
        else:
            calls = [
                [tool_call("shell", {"command": f"pytest -k c{next(counter)}"})] for _ in range(n)
            ]
            body = chat_completion(
                choices=[choice(tool_calls=c, index=i) for i, c in enumerate(calls)]
            )
        return StubResponse(body=body, delay=latency)

    stub = StubServer()
    stub.script(respond)
    with stub:
        answer(stub.base_url)
        while sys.stdin.readline():
            stub.reset()  # keeps the captured requests from growing: the script stays
            stub.script(respond)
            answer("ok")


def shell(command: str) -> str:
    """Run a shell command."""
    return f"ran {command}"


async def our_arm(name: str, url: str, n: int = N) -> Turn:
    from langchain_core.messages import HumanMessage

    from turnbon_graph import create_turnbon_graph
    from turnbon_graph.selectors import LLMSelector

    endpoint = {"api_base": url, "api_key": "sk-bench"}
    selector = LLMSelector(MODEL, completion_kwargs=endpoint, seed=0)
    ask = {"messages": [HumanMessage(QUESTION)]}
    if name in ("graph", "graph-calls"):
        native = {"native_n": False} if name == "graph-calls" else {}
        graph = create_turnbon_graph(
            MODEL,
            [shell],
            execute_tools=False,
            n=n,
            selector=selector,
            completion_kwargs=endpoint,
            seed=0,
            **native,
        ).compile()
        return lambda: graph.ainvoke(ask)
    if name == "chat":
        from turnbon_graph import ChatTurnBoN

        chat = ChatTurnBoN(
            model=MODEL, n=N, selector=selector, completion_kwargs=endpoint
        ).bind_tools([shell])
        return lambda: chat.ainvoke(ask["messages"])
    if name == "middleware":
        from langchain.agents import create_agent
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI

        from turnbon_graph import TurnBoNMiddleware

        direct = tool(shell, return_direct=True)
        model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="sk-bench")  # type: ignore[arg-type]
        agent = create_agent(
            model, [direct], middleware=[TurnBoNMiddleware(n=N, selector=selector)]
        )
        return lambda: agent.ainvoke(ask)
    return await floor_arm(name, url)


async def floor_arm(name: str, url: str) -> Turn:
    """`graph-calls`' 9 requests (captured from one turn on a stub of this process)."""
    from turnbon_graph.testing import StubServer, is_selector_request

    with StubServer() as capture:
        capture.script(_capture_reply)
        graph_turn = await our_arm("graph-calls", capture.base_url)
        await graph_turn()
        requests = list(capture.requests)
    bodies = [r.body or {} for r in sorted(requests, key=is_selector_request)]
    for body in bodies:
        body["model"] = "gpt-4o-mini"
    if name in ("litellm", "client"):
        import litellm

        from turnbon_graph._litellm.client import LiteLLMClient

        keys = ("messages", "tools", "tool_choice", "response_format", "temperature")
        calls = [{k: b[k] for k in keys if k in b} for b in bodies]
        # `client`: our LiteLLMClient (LiteLLM's logging off, priced by us), no graph.
        call = LiteLLMClient().complete if name == "client" else litellm.acompletion

        async def turn() -> Any:
            gen = [call(model=MODEL, api_base=url, api_key="sk-bench", **c) for c in calls[:-1]]
            await asyncio.gather(*gen)
            return await call(model=MODEL, api_base=url, api_key="sk-bench", **calls[-1])

        return turn
    if name == "openai":
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=url, api_key="sk-bench", max_retries=0)

        async def turn() -> Any:
            await asyncio.gather(*(client.chat.completions.create(**b) for b in bodies[:-1]))
            return await client.chat.completions.create(**bodies[-1])

        return turn
    import aiohttp

    session = aiohttp.ClientSession()

    async def post(body: dict[str, Any]) -> Any:
        async with session.post(f"{url}/chat/completions", json=body) as response:
            return await response.json()

    async def turn() -> Any:
        await asyncio.gather(*(post(b) for b in bodies[:-1]))
        return await post(bodies[-1])

    return turn


def _capture_reply(request: Any) -> dict[str, Any]:
    from turnbon_graph.testing import chat_completion, is_selector_request, tool_call

    if is_selector_request(request):
        return chat_completion(json.dumps({"reason": "capture", "selected_index": 0}))
    return chat_completion(tool_calls=[tool_call("shell", {"command": f"ls {time.monotonic()}"})])


async def peer_arm(name: str, url: str) -> Turn:
    if name == "its_hub":
        from its_hub.core.algorithms.bon import BestOfN
        from its_hub.core.lms.openai_lm import OpenAICompatibleLanguageModel
        from its_hub.core.reward_models.llm_judge import LLMJudge

        lm = OpenAICompatibleLanguageModel(
            endpoint=url, api_key="sk-bench", model_name="gpt-4o-mini"
        )
        bon = BestOfN(LLMJudge(lm))
        return lambda: bon.ainfer(lm, QUESTION, budget=N)
    if name == "dspy":
        import dspy

        dspy.configure(lm=dspy.LM(MODEL, api_base=url, api_key="sk-bench", cache=False))
        best = dspy.BestOfN(
            dspy.Predict("question -> answer"), N=N, reward_fn=lambda a, p: 0.0, threshold=1.0
        )
        return lambda: asyncio.to_thread(best, question=QUESTION)
    if name == "optillm":
        import importlib.util
        import types

        from openai import OpenAI

        # optillm's package __init__ starts its whole proxy (Flask, Cerebras, z3, ...):
        # load the `bon` approach alone, under a bare package of the same folder.
        spec = importlib.util.find_spec("optillm")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("optillm is not installed")
        package = types.ModuleType("optillm")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["optillm"] = package
        from optillm.bon import best_of_n_sampling

        client = OpenAI(base_url=url, api_key="sk-bench", max_retries=0)
        return lambda: asyncio.to_thread(best_of_n_sampling, "", QUESTION, client, "gpt-4o-mini", N)
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="sk-bench")
    agent = create_react_agent(model, [tool(shell, return_direct=True)])
    return lambda: agent.ainvoke({"messages": [("user", QUESTION)]})


LAG_TICK_S = 0.01


async def measure(turn: Turn, turns: int, concurrency: int = 1) -> dict[str, float]:
    """CPU and wall time per turn, and the event loop's lag meanwhile: how late a
    10 ms sleep wakes, p50 and p99."""
    lags: list[float] = []

    async def probe() -> None:
        while True:
            asleep = time.perf_counter()
            await asyncio.sleep(LAG_TICK_S)
            lags.append(time.perf_counter() - asleep - LAG_TICK_S)

    watch = asyncio.create_task(probe())
    started, cpu = time.perf_counter(), time.process_time()
    if concurrency == 1:
        for _ in range(turns):
            await turn()
    else:  # `concurrency` episodes of `turns` turns each, all at once

        async def episode() -> None:
            for _ in range(turns):
                await turn()

        await asyncio.gather(*(episode() for _ in range(concurrency)))
        turns *= concurrency
    timings = {
        "cpu": (time.process_time() - cpu) / turns,
        "wall": (time.perf_counter() - started) / turns,
    }
    watch.cancel()
    quantiles = statistics.quantiles(lags, n=100) if len(lags) > 1 else [0.0] * 99
    return {**timings, "lag_p50": quantiles[49], "lag_p99": quantiles[98]}


def worker() -> None:
    """Answers one JSON command a line: {arm, url, turns[, concurrency]} -> timings."""
    arms: dict[str, Turn | str] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            ask = json.loads(line)
            name, key = ask["arm"], f"{ask['arm']}@{ask['url']}@{ask.get('n', N)}"
            if key not in arms:
                try:
                    if name in PEERS:
                        arms[key] = await peer_arm(name, ask["url"])
                    else:
                        arms[key] = await our_arm(name, ask["url"], ask.get("n", N))
                    for _ in range(3):  # warm-up: clients, caches, first-call imports
                        await arms[key]()  # type: ignore[operator]
                except Exception as exc:
                    arms[key] = f"{type(exc).__name__}: {exc}"[:200]
            arm = arms[key]
            if isinstance(arm, str):
                answer(json.dumps({"skip": arm}))
                continue
            timings = await measure(arm, ask["turns"], ask.get("concurrency", 1))
            answer(json.dumps(timings))

    asyncio.run(main())


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f}x [{min(values):.2f}, {max(values):.2f}]"


def compare(args: argparse.Namespace) -> None:
    stub = Process([sys.executable, __file__, "--serve", str(args.latency)])
    url = stub.first_line()
    workers = {"ours": Process([sys.executable, __file__, "--worker"])}
    arms = [a for a in args.arms if a in OURS]
    peers = [a for a in args.arms if a in PEERS]
    if peers and args.peers_python and os.path.exists(args.peers_python):
        workers["peers"] = Process([args.peers_python, __file__, "--worker"])
        arms += peers
    elif peers:
        print(f"peers skipped: no {args.peers_python or '--peers-python'} (make bench-peers)")
    results: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
    skipped: dict[str, str] = {}
    for _ in range(args.rounds):
        for arm in arms:
            if arm in skipped:
                continue
            stub.ask("reset")
            command = json.dumps({"arm": arm, "url": url, "turns": args.turns})
            reply = json.loads(workers["peers" if arm in PEERS else "ours"].ask(command))
            if "skip" in reply:
                skipped[arm] = reply["skip"]
            else:
                results[arm].append(reply)
    print(
        f"N={N}, {MODEL} on the stub ({args.latency * 1000:.0f} ms), {args.rounds} rounds x "
        f"{args.turns} turns, load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(f"{'arm':12} {'CPU ms/turn':>12} {'CPU vs graph [min, max]':>26} {'wall ms/turn':>13}")
    base = results.get("graph", [])
    for arm in arms:
        if arm in skipped:
            print(f"{arm:12} skipped: {skipped[arm]}")
            continue
        rows = results[arm]
        ratios = [r["cpu"] / b["cpu"] for r, b in zip(rows, base, strict=False)]
        print(
            f"{arm:12} {statistics.median(r['cpu'] for r in rows) * 1000:12.1f} "
            f"{spread(ratios) if ratios else '':>26} "
            f"{statistics.median(r['wall'] for r in rows) * 1000:13.1f}"
        )
    if base and results.get("litellm"):
        for arm in ("graph", "graph-calls", "client"):
            if results.get(arm):
                ratios = [
                    a["cpu"] / b["cpu"]
                    for a, b in zip(results[arm], results["litellm"], strict=False)
                ]
                print(f"{arm} CPU vs 9 bare litellm.acompletion calls: {spread(ratios)}")
    for process in (*workers.values(), stub):
        process.close()


def scale(args: argparse.Namespace) -> None:
    """Turns/s, CPU per turn and loop lag of N=4 graph turns at 1..300 concurrent
    episodes (the stub at 50 ms), the default (`graph`) against a call per candidate
    (`graph-calls`), the two interleaved at each size; ratios are graph / graph-calls."""
    stub = Process([sys.executable, __file__, "--serve", "0.05"])
    url = stub.first_line()
    ours = Process([sys.executable, __file__, "--worker"])
    print(
        f"N=4 graph turns, stub at 50 ms, {args.turns} turns an episode, "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    head = f"{'arm':12} {'episodes':>8} {'turns/s':>9} {'CPU ms/turn':>12} {'lag p50/p99 ms':>15}"
    print(head)
    for episodes in (1, 10, 100, 300):
        replies = {}
        for arm in ("graph-calls", "graph"):
            stub.ask("reset")
            command = {"arm": arm, "url": url, "turns": args.turns, "concurrency": episodes, "n": 4}
            reply = replies[arm] = json.loads(ours.ask(json.dumps(command)))
            lag = f"{reply['lag_p50'] * 1000:.0f}/{reply['lag_p99'] * 1000:.0f}"
            print(
                f"{arm:12} {episodes:8} {1 / reply['wall']:9.1f} {reply['cpu'] * 1000:12.1f} "
                f"{lag:>15}"
            )
        one, calls = replies["graph"], replies["graph-calls"]
        faster, leaner = calls["wall"] / one["wall"], one["cpu"] / calls["cpu"]
        print(
            f"{'':12} {episodes:8} graph / graph-calls: turns/s {faster:.2f}x, "
            f"CPU per turn {leaner:.2f}x"
        )
    ours.close()
    stub.close()


def profile(args: argparse.Namespace) -> None:
    import cProfile
    import pstats

    stub = Process([sys.executable, __file__, "--serve", "0"])
    url = stub.first_line()

    async def main() -> None:
        turn = await our_arm(args.profile, url)
        for _ in range(3):
            await turn()
        with cProfile.Profile() as profiler:
            await measure(turn, args.turns)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)

    asyncio.run(main())
    stub.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20, help="turns per arm and round")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per stub answer")
    parser.add_argument("--arms", nargs="+", default=OURS + PEERS)
    parser.add_argument("--peers-python", help="the peers' interpreter (.venv-peers/bin/python)")
    parser.add_argument("--scale", action="store_true", help="1, 10, 100, 300 episodes instead")
    parser.add_argument("--profile", metavar="ARM", help="cProfile one of our arms instead")
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
    elif args.worker:
        worker()
    elif args.profile:
        profile(args)
    elif args.scale:
        scale(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
