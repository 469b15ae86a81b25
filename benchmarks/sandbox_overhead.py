"""Per-command cost of one sandbox setting against another, in one run.

Each round runs the same short command (`true` by default) `--commands` times in an
episode of each setting, alternating which goes first, and the medians of the
per-command times are compared as a ratio. An episode's start (its directory, file
system, control group and bwrap's namespaces) up to its first command's end, and its
close, are measured apart. Shared machines are noisy: compare the ratios, not the
milliseconds.

    python benchmarks/sandbox_overhead.py                    # bwrap / uid, 7 rounds of 30
    python benchmarks/sandbox_overhead.py --compare budgets  # budgets on / off
    python benchmarks/sandbox_overhead.py --rounds 11 --command 'echo hi'

`--compare sandbox`: the bwrap sandbox against the old uid one (as root each episode
runs as its own uid; otherwise as you). `--compare budgets`: the bwrap sandbox with
each episode's budget enforced (a control group and a loop-mounted file system, where
the machine allows) against the same without (`enforce_budgets=False`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import warnings

from turnbon_terminal.host.sandbox import SandboxHost, SandboxSettings

COMPARISONS = {
    "sandbox": {"bwrap": {}, "uid": {"sandbox": "uid"}},
    "budgets": {"budgets": {}, "no budgets": {"enforce_budgets": False}},
}


async def _episode(host: SandboxHost, command: str, count: int) -> tuple[float, list[float], float]:
    """(seconds from creating the episode to its first command's end, per-command
    seconds of the rest, seconds to close it)."""
    started = time.perf_counter()
    box = await asyncio.to_thread(host.create, "bench")
    closed = False
    try:
        first = await box.run(command)
        startup = time.perf_counter() - started
        assert first.ok, first.render()
        times = []
        for _ in range(count):
            began = time.perf_counter()
            result = await box.run(command)
            times.append(time.perf_counter() - began)
            assert result.ok, result.render()
        began = time.perf_counter()
        await box.close()
        closed = True
        return startup, times, time.perf_counter() - began
    finally:
        if not closed:
            await box.close()


def _spread(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    low, high = quartiles[0] * 1000, quartiles[2] * 1000
    return f"median {statistics.median(values) * 1000:.1f} ms (IQR {low:.1f}-{high:.1f})"


async def main(rounds: int, commands: int, command: str, compare: str) -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the uid fallback's warning, expected here
        hosts = {
            name: SandboxHost(SandboxSettings(**options))  # type: ignore[arg-type]
            for name, options in COMPARISONS[compare].items()
        }
    first, second = hosts
    measured: dict[str, dict[str, list[float]]] = {
        name: {"command": [], "start": [], "close": []} for name in hosts
    }
    ratios: dict[str, list[float]] = {"command": [], "start": [], "close": []}
    for number in range(rounds):
        order = list(hosts) if number % 2 == 0 else list(reversed(hosts))
        medians: dict[str, dict[str, float]] = {}
        for name in order:
            start, times, close = await _episode(hosts[name], command, commands)
            measured[name]["start"].append(start)
            measured[name]["command"] += times
            measured[name]["close"].append(close)
            medians[name] = {"command": statistics.median(times), "start": start, "close": close}
        for what in ratios:
            ratios[what].append(medians[first][what] / medians[second][what])
    width = max(map(len, hosts))
    for name in hosts:
        print(
            f"{name:{width}}  per command: {_spread(measured[name]['command'])}; start to "
            f"first command: {_spread(measured[name]['start'])}; close: "
            f"{_spread(measured[name]['close'])}"
        )
    summary: dict[str, object] = {"compare": f"{first} / {second}"}
    for what, values in ratios.items():
        ratio, low, high = statistics.median(values), min(values), max(values)
        print(
            f"{first} / {second}, {what}: {ratio:.2f}x (rounds from {low:.2f}x to "
            f"{high:.2f}x, {rounds} rounds of {commands} x {command!r})"
        )
        summary[f"{what}_ratio"] = round(ratio, 3)
        summary[f"{what}_ratio_range"] = [round(low, 3), round(high, 3)]
        summary[f"ms_{what}"] = {
            n: round(statistics.median(measured[n][what]) * 1000, 2) for n in hosts
        }
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--commands", type=int, default=30)
    parser.add_argument("--command", default="true")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="sandbox")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args()
    summary = asyncio.run(main(args.rounds, args.commands, args.command, args.compare))
    if args.json:
        print(json.dumps(summary))
