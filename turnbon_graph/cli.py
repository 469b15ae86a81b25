"""The `turnbon` command. Imports stay inside the commands so `--help` answers at once."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turnbon",
        description="Turn-level best-of-N sampling for LangGraph agents.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="solve a small file task turn by turn, showing every candidate and choice",
        description=(
            "Solve a small file task with Turn-BoN, printing each turn's candidates, the "
            "choice and the tool output. Without --model it runs on a scripted stub model "
            "on loopback: no API key, no network."
        ),
    )
    demo.add_argument("--model", help="a LiteLLM model id, e.g. openai/gpt-4o-mini")
    demo.add_argument("--selector", help="a LiteLLM model id for the selector (default: --model)")
    demo.add_argument("-n", type=int, default=4, help="candidates per turn (default 4)")
    demo.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # LiteLLM otherwise fetches its price list from the internet at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if args.command == "demo":
        from turnbon_graph.demo import run_demo

        passed = asyncio.run(
            run_demo(model=args.model, n=args.n, selector=args.selector, seed=args.seed)
        )
        return 0 if passed else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
