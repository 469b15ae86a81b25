"""Decode throughput of the embedded local model, and the wall time of one N=4 turn on it.

Starts the in-process llama.cpp server (`turnbon_local.LocalModelServer`) twice: with one
slot and one request at a time, then with `--parallel` slots (4) and as many concurrent
requests. Every request has the same prompt and decodes exactly `--max-tokens` tokens
(`ignore_eos`), through LiteLLM's real HTTP path. Reported: completion tokens per second
per request (its tokens over its latency, prompt included) and in aggregate (all tokens
of a round over the round's wall time), medians over `--repeats` rounds, and the ratios
between the two set-ups, all measured in one run (shared machines are noisy: compare
ratios, not seconds).

Then the wall time of one Turn-BoN turn with N=4 on a 4-slot server (a fresh one per
turn), with `FirstSelector` (generation only), with the default LLM selector (the same
tiny model judging the candidates; its fallbacks are counted, since a 135M model often
cannot answer the selector's schema, and its calls have no `max_tokens`, so a turn is cut
off after `--turn-timeout`), with that selector's calls capped like the generator's, and
with an `LLMSelector` whose JSON-schema `response_format` llama.cpp enforces by grammar.

    python benchmarks/local_throughput.py                 # 64 tokens, 5 repeats
    python benchmarks/local_throughput.py --repeats 9 --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections import Counter

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from langchain_core.messages import HumanMessage

from turnbon_graph import TurnEngine, turn_record
from turnbon_graph.selectors import FirstSelector, LLMSelector, Selector
from turnbon_local import LocalModelServer, default_threads

PROMPT = [{"role": "user", "content": "Explain in a few sentences how a compiler works."}]
TASK = (
    "You are in a shell. The file numbers.txt holds one integer per line. Write their sum "
    "to total.txt. Reply with the single shell command to run next."
)


async def one_request(server: LocalModelServer, max_tokens: int) -> tuple[int, float]:
    started = time.perf_counter()
    response = await litellm.acompletion(
        model=server.model,
        messages=PROMPT,
        max_tokens=max_tokens,
        temperature=0.8,
        extra_body={"ignore_eos": True},  # decode exactly max_tokens tokens
        **server.completion_kwargs(),
    )
    return response.usage.completion_tokens, time.perf_counter() - started


async def round_of(
    server: LocalModelServer, concurrent: int, max_tokens: int
) -> tuple[list[float], float]:
    """Per-request tokens/s and the aggregate tokens/s of `concurrent` requests at once."""
    started = time.perf_counter()
    results = await asyncio.gather(*(one_request(server, max_tokens) for _ in range(concurrent)))
    wall = time.perf_counter() - started
    return [tokens / latency for tokens, latency in results], sum(t for t, _ in results) / wall


async def decode_benchmark(
    parallel: int, max_tokens: int, repeats: int, threads: int
) -> dict[str, float]:
    """Both servers live side by side (an idle one costs nothing) and every repeat runs one
    round on each, in alternating order, so that a change in the machine's load hits both
    set-ups alike; the ratio is taken per repeat."""
    single_rate: list[float] = []
    multi_rate: list[float] = []
    single_total: list[float] = []
    multi_total: list[float] = []
    ratios: list[float] = []
    async with (
        LocalModelServer(parallel=1, ctx_per_slot=1024, threads=threads) as one,
        LocalModelServer(parallel=parallel, ctx_per_slot=1024, threads=threads) as many,
    ):
        for server in (one, many):  # warm-up: LiteLLM's clients, llama.cpp's graphs
            await one_request(server, 8)
        for repeat in range(repeats):
            if repeat % 2:
                multi = await round_of(many, parallel, max_tokens)
                single = await round_of(one, 1, max_tokens)
            else:
                single = await round_of(one, 1, max_tokens)
                multi = await round_of(many, parallel, max_tokens)
            single_rate.extend(single[0])
            multi_rate.extend(multi[0])
            single_total.append(single[1])
            multi_total.append(multi[1])
            ratios.append(multi[1] / single[1])
    median = statistics.median
    return {
        "single_per_request": median(single_rate),
        "single_aggregate": median(single_total),
        "multi_per_request": median(multi_rate),
        "multi_aggregate": median(multi_total),
        "ratio": median(ratios),
    }


async def one_turn(
    selector_name: str, n: int, max_tokens: int, threads: int, cutoff: float
) -> tuple[float | None, str]:
    """One timed turn on a fresh server: a turn cut off after `cutoff` seconds leaves its
    abandoned requests decoding on llama.cpp (it does not notice a non-streamed client
    leaving), and they must not slow the next turn down."""
    async with LocalModelServer(parallel=n, threads=threads) as server:
        capped = {**server.completion_kwargs(), "max_tokens": max_tokens}
        selector: Selector | None = None  # "llm": the default, on the generator's model
        if selector_name == "first":
            selector = FirstSelector()
        elif selector_name == "llm-grammar":  # the schema enforced by llama.cpp's grammar
            selector = LLMSelector(
                server.model,
                completion_kwargs={**capped, "max_tokens": 200, "temperature": 0.0},
                response_format=True,
                seed=0,
            )
        engine = TurnEngine.from_options(
            server.model,
            n=n,
            selector=selector,
            completion_kwargs=capped,
            # "llm-capped": the default selector, with a cap on its answer's length too
            selector_kwargs=capped if selector_name == "llm-capped" else None,
            seed=0,
        )
        await one_request(server, 8)  # warm-up
        started = time.perf_counter()
        try:
            message = await asyncio.wait_for(engine.run([HumanMessage(TASK)]), cutoff)
        except TimeoutError:
            return None, f"cut off after {cutoff:g} s"
        seconds = time.perf_counter() - started
    record = turn_record(message)
    if record is None:
        return seconds, "no record"
    if record.fallback:
        return seconds, f"{record.selector} (fallback: {record.fallback[:60]})"
    return seconds, record.selector


async def turn_times(
    selector_name: str, n: int, max_tokens: int, repeats: int, threads: int, cutoff: float
) -> tuple[list[float], Counter[str]]:
    outcomes: Counter[str] = Counter()
    samples: list[float] = []
    for _ in range(repeats):
        seconds, outcome = await one_turn(selector_name, n, max_tokens, threads, cutoff)
        outcomes[outcome] += 1
        samples.append(cutoff if seconds is None else seconds)
    return samples, outcomes


async def main(args: argparse.Namespace) -> None:
    threads = args.threads or default_threads()
    print(
        f"SmolLM2-135M-Instruct Q4_1, llama.cpp in-process (xllamacpp), {threads} thread(s), "
        f"{os.cpu_count()} CPU(s), {args.max_tokens} tokens per request, "
        f"medians of {args.repeats}; load average {os.getloadavg()[0]:.2f} at the start\n"
    )
    result = await decode_benchmark(args.parallel, args.max_tokens, args.repeats, threads)
    rows: list[tuple[str, ...]] = [
        ("| set-up", "per request tok/s", "aggregate tok/s", "aggregate vs 1 slot |"),
        ("|---", "---:", "---:", "---:|"),
        (
            "| 1 slot, 1 request",
            f"{result['single_per_request']:.1f}",
            f"{result['single_aggregate']:.1f}",
            "1.00x |",
        ),
        (
            f"| {args.parallel} slots, {args.parallel} concurrent",
            f"{result['multi_per_request']:.1f}",
            f"{result['multi_aggregate']:.1f}",
            f"{result['ratio']:.2f}x |",
        ),
    ]
    for row in rows:
        print(" | ".join(row))

    print(
        f"\nOne Turn-BoN turn, N={args.parallel} on {args.parallel} slots, generator "
        f"max_tokens={args.turn_max_tokens}, medians of {args.turn_repeats}:\n"
    )
    print("| selector | turn wall time (s), median | slowest | outcomes |")
    print("|---|---:|---:|---|")
    labels = {
        "first": "FirstSelector()",
        "llm": "default LLM selector (None)",
        "llm-capped": f"default LLM selector, its calls capped at {args.turn_max_tokens} tokens",
        "llm-grammar": "LLMSelector(response_format=True, max_tokens=200)",
    }
    for name, label in labels.items():
        seconds, outcomes = await turn_times(
            name, args.parallel, args.turn_max_tokens, args.turn_repeats, threads, args.turn_timeout
        )
        summary = "; ".join(f"{count}x {what}" for what, count in outcomes.most_common())
        median = statistics.median(seconds)  # a turn cut off counts as the timeout
        print(f"| {label} | {median:.2f} | {max(seconds):.2f} | {summary} |")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    parser.add_argument("--turn-max-tokens", type=int, default=64)
    parser.add_argument("--turn-repeats", type=int, default=3)
    parser.add_argument(
        "--turn-timeout",
        type=float,
        default=120.0,
        help="cut a turn off after this long (the uncapped selector can ramble on)",
    )
    asyncio.run(main(parser.parse_args()))
