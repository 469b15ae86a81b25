"""`turnbon analyze`: analysis.md for a run folder (what the selector prefers, the judge's
and the rollouts' findings), written by `turnbon_graph.analysis.markdown`.

Write analysis.md for a run folder: which behaviours the selector's picks show against
the share expected from a random pick (the paper's Figure 4), and how long the picked
actions are against the unpicked ones and the baseline's (Figure 5), each with a paired
bootstrap over tasks; then the judge's flagged shares (Table 3) when `turnbon judge`
wrote RUN/judge.jsonl, and the branch rollouts' measures when `turnbon rollouts` wrote
RUN/rollouts.jsonl. Also writes report.html beside it: the same with the plots inlined
and sortable tables, one self-contained file to send. Prints both paths.
"""

from __future__ import annotations

import argparse
from typing import Any

from turnbon_graph.cli.flags.parser import described, subcommand
from turnbon_graph.cli.flags.shared import SHARED, run_folder_arguments

HELP = (
    "write what the selector prefers (Figures 4, 5), the judge's and the rollouts' "
    "findings for a run folder"
)
"""`turnbon analyze` in the list of commands."""


def add_parser(commands: Any) -> None:
    """Adds `turnbon analyze` and its flags to `commands`."""
    parser = subcommand(commands, "analyze", help=HELP, description=described(__doc__))
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
