"""Per-command cost of the bwrap sandbox against the old uid sandbox, in one run.

Each round runs the same short command (`true` by default) `--commands` times in an
episode of each sandbox, alternating which goes first, and the medians of the
per-command times are compared as a ratio (bwrap / uid). A sandbox's start (bwrap's
namespaces, once per episode) is measured apart. Shared machines are noisy: compare
the ratio, not the milliseconds.

    python benchmarks/sandbox_overhead.py                 # 7 rounds of 30 commands
    python benchmarks/sandbox_overhead.py --rounds 11 --command 'echo hi'

As root the uid sandbox runs each episode as its own uid; otherwise as you.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import warnings

from turnbon_terminal.sandbox import SandboxHost, SandboxSettings


async def _episode(host: SandboxHost, command: str, count: int) -> tuple[float, list[float]]:
    """(seconds to the first command's end, per-command seconds of the rest)."""
    box = host.create("bench")
    try:
        started = time.perf_counter()
        first = await box.run(command)
        startup = time.perf_counter() - started
        assert first.ok, first.render()
        times = []
        for _ in range(count):
            began = time.perf_counter()
            result = await box.run(command)
            times.append(time.perf_counter() - began)
            assert result.ok, result.render()
        return startup, times
    finally:
        await box.close()


def _spread(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    low, high = quartiles[0] * 1000, quartiles[2] * 1000
    return f"median {statistics.median(values) * 1000:.1f} ms (IQR {low:.1f}-{high:.1f})"


async def main(rounds: int, commands: int, command: str) -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the uid fallback's warning, expected here
        hosts = {
            "bwrap": SandboxHost(SandboxSettings()),
            "uid": SandboxHost(SandboxSettings(sandbox="uid")),
        }
    per_command: dict[str, list[float]] = {name: [] for name in hosts}
    startup: dict[str, list[float]] = {name: [] for name in hosts}
    ratios = []
    for number in range(rounds):
        order = list(hosts) if number % 2 == 0 else list(reversed(hosts))
        medians = {}
        for name in order:
            start, times = await _episode(hosts[name], command, commands)
            startup[name].append(start)
            per_command[name] += times
            medians[name] = statistics.median(times)
        ratios.append(medians["bwrap"] / medians["uid"])
    for name in hosts:
        print(
            f"{name:5}  per command: {_spread(per_command[name])}; first command "
            f"(with the sandbox's start): {_spread(startup[name])}"
        )
    low, high = min(ratios), max(ratios)
    ratio = statistics.median(ratios)
    print(
        f"bwrap / uid per command: {ratio:.2f}x (rounds from {low:.2f}x to {high:.2f}x, "
        f"{rounds} rounds of {commands} x {command!r})"
    )
    return {
        "ratio": round(ratio, 3),
        "ratio_range": [round(low, 3), round(high, 3)],
        "ms_per_command": {
            n: round(statistics.median(v) * 1000, 2) for n, v in per_command.items()
        },
        "ms_first_command": {n: round(statistics.median(v) * 1000, 2) for n, v in startup.items()},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--commands", type=int, default=30)
    parser.add_argument("--command", default="true")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args()
    summary = asyncio.run(main(args.rounds, args.commands, args.command))
    if args.json:
        print(json.dumps(summary))
