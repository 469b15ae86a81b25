"""`turnbon report`: a run folder's results as Markdown with tables and plots."""

from __future__ import annotations

import argparse
from typing import Any

from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.shared import run_folder_arguments
from turnbon_graph.cli.flags.values import finite_positive


def add_parser(commands: Any) -> None:
    """Adds `turnbon report` and its flags to `commands`."""
    parser = command_parser(commands, "report")
    run_folder_arguments(parser, "RUN/report")
    parser.add_argument(
        "--tree",
        metavar="EPISODE",
        help="also draw this episode's search tree, named SETTING/TASK__TRIAL as under "
        "RUN/trees/ (e.g. 'beam_W=2_N=2/largest-file__0', or the setting as the report "
        "labels it: 'beam W=2 N=2/largest-file__0'); a wrong name lists the valid ones",
    )
    parser.add_argument(
        "--match-spend",
        type=finite_positive,
        metavar="AMOUNT",
        help="also compare, per strategy, the setting whose mean realised spend per "
        "episode is closest to AMOUNT (in the budgets' unit: tokens, completion tokens or "
        "dollars), from a sweep of widths, -n and budgets",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs `turnbon report` with its parsed flags; returns the exit status."""
    from turnbon_graph.bench.report.html import HTML_FILE
    from turnbon_graph.bench.report.writer import write_report

    path = write_report(
        args.run,
        args.out,
        baseline=args.baseline,
        resamples=args.resamples,
        tree=args.tree,
        match_spend=args.match_spend,
    )
    print(path)
    print(path.parent / HTML_FILE)
    return 0
