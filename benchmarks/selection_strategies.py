"""Adaptive N against fixed N, and early commit against waiting for all N, on the stub.

Two scripted workloads, each arm measured in the same run (compare the ratios):

1. Agreement: `--turns` turns, a share `--unanimous` of them where every candidate
   proposes the same action, the rest split among three actions. Fixed N=8 with an LLM
   selector against `AdaptiveN` (first batch 2, step 2, cap 8). The stub's selector picks
   the plurality action, so on high-agreement turns both arms should choose the same.
2. Heavy-tailed latency: every generator call waits a log-normal time (median
   `--median-latency`, sigma `--sigma`); the same delays per turn for both arms. Waiting
   for all N=8 against `EarlyCommit` (4 candidates, then a 50 ms grace).

    python benchmarks/selection_strategies.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage

from turnbon_graph import AdaptiveN, EarlyCommit, TurnEngine, turn_record
from turnbon_graph.selectors import LLMSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

GENERATOR_USAGE = {"prompt_tokens": 200, "completion_tokens": 30, "total_tokens": 230}
SELECTOR_USAGE = {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920}
TURN = re.compile(r"turn (\d+) of (\w+)")


def plurality_judge(request: CapturedRequest) -> dict[str, Any]:
    """The stub's selector: the display index of the most proposed action."""
    user = (request.body or {})["messages"][1]["content"]
    blocks = re.findall(r'<candidate index="(\d+)">\n(.*?)\n</candidate>', user, re.S)
    counts = Counter(body for _, body in blocks)
    best = max(blocks, key=lambda block: counts[block[1]])[0]
    answer = json.dumps({"reason": "plurality", "selected_index": int(best)})
    return chat_completion(answer, usage=SELECTOR_USAGE)


def scripted(unanimous: float, delays: dict[int, list[float]], seed: int) -> Callable[..., Any]:
    arrivals: Counter[tuple[str, int]] = Counter()

    def respond(request: CapturedRequest) -> StubResponse:
        if is_selector_request(request):
            return StubResponse(body=plurality_judge(request))
        text = (request.body or {})["messages"][-1]["content"]
        match = TURN.search(text)
        assert match is not None
        turn, arm = int(match.group(1)), match.group(2)
        k = arrivals[(arm, turn)]
        arrivals[(arm, turn)] += 1
        rng = random.Random(f"{seed}/{turn}")
        if rng.random() < unanimous:
            command = f"step-{turn}"
        else:  # contested: this request's own draw among three actions
            command = random.Random(f"{seed}/{turn}/{arm}/{k}").choice(["a", "b", "c"])
            command = f"step-{turn}-{command}"
        body = chat_completion(
            tool_calls=[tool_call("shell", {"command": command})], usage=GENERATOR_USAGE
        )
        delay = delays[turn][k % len(delays[turn])] if turn in delays else 0.0
        return StubResponse(body=body, delay=delay)

    return respond


async def run_arm(engine: TurnEngine, arm: str, turns: int) -> list[tuple[Any, float]]:
    out = []
    for turn in range(turns):
        started = time.perf_counter()
        message = await engine.run([HumanMessage(f"Do turn {turn} of {arm}.")])
        out.append((turn_record(message), time.perf_counter() - started))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    delays = {
        t: [
            min(args.max_latency, rng.lognormvariate(0, args.sigma) * args.median_latency)
            for _ in range(8)
        ]
        for t in range(args.latency_turns)
    }
    with StubServer() as stub:
        stub.script(scripted(args.unanimous, delays={}, seed=args.seed))
        endpoint = {"api_base": stub.base_url, "api_key": "sk-bench"}

        def engine(**options: Any) -> TurnEngine:
            judge = LLMSelector("openai/judge", completion_kwargs=endpoint, seed=0)
            return TurnEngine.from_options(
                "openai/stub", n=8, selector=judge, completion_kwargs=endpoint, **options
            )

        fixed = await run_arm(engine(), "fixed", args.turns)
        adaptive = await run_arm(
            engine(adaptive=AdaptiveN(first_batch=2, step=2)), "adaptive", args.turns
        )

        stub.reset()
        stub.script(scripted(1.0, delays=delays, seed=args.seed))
        wait_all = await run_arm(engine(), "waitall", args.latency_turns)
        hedged = await run_arm(
            engine(early_commit=EarlyCommit(min_candidates=4, grace_s=0.05)),
            "hedged",
            args.latency_turns,
        )
        disconnects = stub.disconnects

    def calls(arm: list[tuple[Any, float]]) -> int:
        return sum(r.usage.generator.calls for r, _ in arm)

    def tokens(arm: list[tuple[Any, float]]) -> int:
        return sum(r.usage.generator.total_tokens + r.usage.selector.total_tokens for r, _ in arm)

    def chosen(record: Any) -> str:
        return json.dumps(record.candidates[record.selected_index].tool_calls[0]["args"])

    high = [t for t, (r, _) in enumerate(fixed) if r.agreement >= 0.75]
    same = sum(chosen(fixed[t][0]) == chosen(adaptive[t][0]) for t in high)
    unanimous = sum(r.selector == "unanimous" for r, _ in fixed)
    print(f"## Adaptive N vs fixed N=8 ({args.turns} turns, {unanimous} of them unanimous)\n")
    print("| arm | generator calls | tokens (gen + sel) | selector calls |")
    print("|---|---|---|---|")
    for name, arm in (("fixed N=8", fixed), ("adaptive (2 + 2.., cap 8)", adaptive)):
        sel = sum(r.usage.selector.calls for r, _ in arm)
        print(f"| {name} | {calls(arm)} | {tokens(arm)} | {sel} |")
    print(
        f"\nAdaptive made {1 - calls(adaptive) / calls(fixed):.0%} fewer generator calls and used "
        f"{1 - tokens(adaptive) / tokens(fixed):.0%} fewer tokens; on the {len(high)} turns where "
        f"fixed N=8 agreed >= 75%, it chose the same action on {same}."
    )
    print(
        f"\n## Early commit vs wait-for-all (N=8, {args.latency_turns} turns, log-normal latency, "
        f"median {args.median_latency * 1000:.0f} ms, sigma {args.sigma})\n"
    )
    print("| arm | p50 turn s | p95 turn s |")
    print("|---|---|---|")
    for name, arm in (("wait for all 8", wait_all), ("early commit (4, +50 ms)", hedged)):
        times = [s for _, s in arm]
        print(f"| {name} | {percentile(times, 0.5):.3f} | {percentile(times, 0.95):.3f} |")
    p95 = percentile([s for _, s in hedged], 0.95) / percentile([s for _, s in wait_all], 0.95)
    p50 = statistics.median(s for _, s in hedged) / statistics.median(s for _, s in wait_all)
    cancelled = sum(len(r.sampling.cancelled) for r, _ in hedged)
    print(
        f"\nEarly commit: p50 {p50:.2f}x, p95 {p95:.2f}x of wait-for-all; {cancelled} calls "
        f"cancelled, {disconnects} disconnects seen by the stub."
    )


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--unanimous", type=float, default=0.7)
    parser.add_argument("--latency-turns", type=int, default=40)
    parser.add_argument("--median-latency", type=float, default=0.2)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--max-latency", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(main(parser.parse_args()))
