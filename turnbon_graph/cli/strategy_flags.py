"""The flags of `turnbon bench` that say how each episode searches (`--strategy`,
`--width`, `--value`, `--token-budget`, ...): docs/strategies.md."""

from __future__ import annotations

import argparse

from turnbon_graph.cli.arguments import positive_float, positive_int, share


def strategy_arguments(parser: argparse.ArgumentParser) -> None:
    """How each episode searches (`turnbon_graph.bench.strategies`, docs/strategies.md)."""
    from turnbon_graph.bench.strategies.names import (
        DEFAULT_AGREE,
        DEFAULT_HORIZON,
        DEFAULT_WIDTH,
        STRATEGIES,
    )

    widths = ", ".join(f"{name} {width}" for name, width in DEFAULT_WIDTH.items())
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        nargs="+",
        default=["bon"],
        metavar="NAME",
        help="one setting each, with every N (particle at N=1 only), in one run folder; "
        "bon: N candidates a turn, the selector picks one; beam: --width trajectories, "
        "each proposing N candidates a turn, each run in a fork of its environment, the "
        "best by --value kept; particle: --width particles of one candidate a turn, "
        f"resampled by value; choose from {', '.join(STRATEGIES)}",
    )
    parser.add_argument(
        "--width",
        type=positive_int,
        metavar="W",
        help=f"trajectories a search keeps (default: {widths})",
    )
    parser.add_argument(
        "--value",
        metavar="MODEL|stub",
        help="the value model that scores a search's partial trajectories 0-10 (default: "
        "--model, on its endpoint); stub: the stub of --model stub",
    )
    parser.add_argument(
        "--value-temperature",
        type=positive_float,
        default=1.0,
        metavar="T",
        help="particle: the softmax temperature of resampling by value (scores 0-10)",
    )
    parser.add_argument(
        "--horizon",
        type=positive_int,
        metavar="H",
        help="lookahead: N candidates a turn, each distinct one run in a fork and rolled out "
        "H turns at N=1; the one whose rollout --value scores best is taken (default: "
        f"{DEFAULT_HORIZON})",
    )
    parser.add_argument(
        "--agree",
        type=share,
        metavar="A",
        help="escalate: N candidates a turn; when the share proposing the most common action "
        "is below A (0 < A <= 1), the turn is sampled again with more effort "
        "(reasoning_effort one step up where the model takes it, else a think-step-by-step "
        f"prompt) and the selector picks among those (default: {DEFAULT_AGREE:g})",
    )
    parser.add_argument(
        "--token-budget",
        type=positive_int,
        nargs="+",
        metavar="T",
        help="tokens an episode may spend: prompt plus completion of generator, selector "
        "and value calls together; the strategy narrows, then falls back to one candidate, "
        "then stops, rather than go over; several budgets make a setting each, for every "
        "strategy (default: no bound)",
    )
