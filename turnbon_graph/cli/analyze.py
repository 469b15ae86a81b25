"""`turnbon analyze`: analysis.md for a run folder (what the selector prefers, the judge's
and the rollouts' findings), written by `turnbon_graph.analysis.markdown`."""

from __future__ import annotations

import argparse
from typing import Any

from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.shared import SHARED, run_folder_arguments


def add_parser(commands: Any) -> None:
    """Adds `turnbon analyze` and its flags to `commands`."""
    parser = command_parser(commands, "analyze")
    run_folder_arguments(parser, "RUN/analysis")
    SHARED["seed"].add(parser, help="the bootstrap's seed")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs `turnbon analyze` with its parsed flags; returns the exit status."""
    from turnbon_graph.analysis.markdown import write_analysis
    from turnbon_graph.bench.report.html import HTML_FILE

    path = write_analysis(
        args.run, args.out, baseline=args.baseline, resamples=args.resamples, seed=args.seed
    )
    print(path)
    print(path.parent / HTML_FILE)
    return 0
