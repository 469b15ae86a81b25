"""The flags of `turnbon bench` that say how each episode searches (`--strategy`,
`--width`, `--value`, `--token-budget`, ...): docs/strategies.md."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from turnbon_graph.cli.flags.values import finite_positive, positive_int, share


def at_most(limit: int, why: str) -> Callable[[str], int]:
    """argparse type: a whole number from 1 to `limit` (`why` says what the bound keeps)."""

    def bounded(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value} is above {limit}, the most {why}")
        return value

    return bounded


def check_horizon(horizon: int | None) -> None:
    """Refuses a lookahead horizon above `MAX_HORIZON` (the flag's type is shared with
    `turnbon rollouts --horizon`, which has no such bound)."""
    from turnbon_graph.bench.strategies.names import MAX_HORIZON
    from turnbon_graph.errors import ConfigurationError

    if horizon is not None and horizon > MAX_HORIZON:
        raise ConfigurationError(
            f"--horizon {horizon} is above {MAX_HORIZON}, the most turns a lookahead rollout "
            "continues (each turn of it is a generator call per candidate, all thrown away)"
        )


def rubric_text(text: str) -> str:
    """argparse type of --value-rubric: the text, or a file's (`@PATH`)."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    if not text.strip():
        raise argparse.ArgumentTypeError("the rubric is empty")
    return text


def strategy_arguments(parser: argparse.ArgumentParser) -> None:
    """How each episode searches (`turnbon_graph.bench.strategies`, docs/strategies.md)."""
    from turnbon_graph.bench.strategies.names import BUDGET_UNITS, MAX_HORIZON, MAX_WIDTH
    from turnbon_graph.bench.strategies.registry import strategy_kinds, strategy_names

    kinds = strategy_kinds()
    widths = ", ".join(f"{k.name} {k.width}" for k in kinds if k.width is not None)
    horizon = next(k.horizon for k in kinds if k.horizon is not None)
    agree = next(k.agree for k in kinds if k.agree is not None)
    fixed = "; ".join(f"{k.name} at N={k.n} only" for k in kinds if k.n is not None)
    parser.add_argument(
        "--strategy",
        choices=strategy_names(),
        nargs="+",
        default=["bon"],
        metavar="NAME",
        help=f"one setting each, with every N ({fixed}), in one run folder; "
        + "; ".join(f"{k.name}: {k.summary}" for k in kinds)
        + f" (choose from {', '.join(strategy_names())})",
    )
    parser.add_argument(
        "--single-sample",
        action="store_true",
        help="also run plain bon at N=1 (when no --strategy and -n make it): the "
        "single-sample baseline the report's exploration/exploitation decomposition "
        "measures mu and h against",
    )
    parser.add_argument(
        "--width",
        type=at_most(MAX_WIDTH, "a search keeps (a turn makes up to W x N forks)"),
        nargs="+",
        metavar="W",
        help=f"trajectories a search keeps, 1 to {MAX_WIDTH}; several: a setting each "
        f"(default: {widths})",
    )
    parser.add_argument(
        "--value",
        metavar="MODEL|prm:MODEL|oracle|stub",
        help="what scores a search's partial trajectories 0-10: MODEL, an LLM asked by "
        "a rubric (default: --model, on its endpoint); prm:MODEL, a process reward model "
        "served at that LiteLLM id; oracle, the task's own tests on a fork of the "
        "trajectory's environment (an upper bound that leaks the verifier, labelled "
        "value=oracle); stub: the stub of --model stub",
    )
    parser.add_argument(
        "--value-rubric",
        type=rubric_text,
        metavar="TEXT|@FILE",
        help="the criteria the --value LLM scores by, in place of its default rubric "
        "(@FILE: read from a file)",
    )
    parser.add_argument(
        "--value-api-base",
        metavar="URL",
        help="the endpoint of the --value model (a self-hosted reward model, say); "
        "default: LiteLLM's own for its provider",
    )
    parser.add_argument(
        "--value-temperature",
        type=finite_positive,
        nargs="+",
        default=[1.0],
        metavar="T",
        help="particle: the softmax temperature of resampling by value, over the scores "
        "normalised to [0, 1] (a finite number above 0; lower follows the scores more "
        "greedily); several: a setting each",
    )
    parser.add_argument(
        "--horizon",
        type=positive_int,  # as `turnbon rollouts --horizon`; its bound: `check_horizon`
        metavar="H",
        help="lookahead: N candidates a turn, each distinct one run in a fork and rolled out "
        f"H turns (1 to {MAX_HORIZON}) at N=1; the one whose rollout --value scores best "
        f"is taken (default: {horizon})",
    )
    parser.add_argument(
        "--agree",
        type=share,
        metavar="A",
        help="escalate: N candidates a turn; when the share proposing the most common action "
        "is below A (0 < A <= 1), the turn is sampled again with more effort "
        "(reasoning_effort one step up where the model takes it, else a think-step-by-step "
        f"prompt) and the selector picks among those (default: {agree:g})",
    )
    parser.add_argument(
        "--token-budget",
        type=finite_positive,
        nargs="+",
        metavar="T",
        help="what an episode may spend on its generator, selector, value and rollout "
        "calls together, in --budget-unit; the strategy narrows, then falls back to one "
        "candidate, then stops, rather than go over, and every call's max_tokens is "
        "clamped to what is left; an episode that cannot afford one call ends as "
        "budget_exhausted; several budgets make a setting each, for every strategy "
        "(default: no bound)",
    )
    parser.add_argument(
        "--budget-unit",
        choices=BUDGET_UNITS,
        default="tokens",
        help="what --token-budget counts: tokens, prompt plus completion tokens; "
        "completion, completion tokens alone, as the paper's Table 1 counts them; usd, "
        "the cost in dollars by LiteLLM's price map (a whole number of tokens, or dollars)",
    )
    parser.add_argument(
        "--estimates",
        type=Path,
        metavar="FILE",
        help="plan every --token-budget on the cost estimates of a pilot run (the "
        "estimates.json in its run folder; the same settings, fewer tasks will do), "
        "frozen: no setting's spend then depends on the order its episodes finish "
        "(default: each setting learns its own as the run goes, kept in the run folder "
        "for a resume)",
    )
