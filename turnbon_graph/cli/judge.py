"""`turnbon judge`: an LLM judge's yes/no rubric verdicts on every attempt of a run folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.shared import SHARED
from turnbon_graph.cli.flags.values import INTERRUPTED, STUB_MODEL


def add_parser(commands: Any) -> None:
    """Adds `turnbon judge` and its flags to `commands`."""
    parser = command_parser(commands, "judge")
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    SHARED["model"].add(
        parser,
        required=True,
        help="a LiteLLM model id for the judge, e.g. openai/gpt-4o-mini (not 'stub': no "
        "stub policy answers judge questions)",
    )
    parser.add_argument(
        "--rubrics",
        type=Path,
        nargs="+",
        action="extend",
        metavar="FILE",
        help="YAML rubric files applied over the shipped ones in order: an entry with a "
        "shipped id changes the fields it gives, a new id is added, `enabled: false` drops one",
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        action="extend",
        metavar="SETTING",
        help="judge only these settings, e.g. N=1 N=4 (default: all)",
    )
    SHARED["baseline"].add(parser)
    SHARED["tasks"].add(
        parser, help="the --tasks SPEC the run was made with, to find its tasks' instructions"
    )
    SHARED["api_base"].add(
        parser,
        help="api_base for the judge's calls, e.g. a local OpenAI-compatible server: "
        "--model openai/NAME --api-base http://localhost:8000/v1",
    )
    SHARED["concurrency"].add(parser, help="judge calls at once")
    parser.add_argument(
        "--retry-unknown",
        action="store_true",
        help="ask again where an earlier verdict is unknown (no valid answer, or the call failed)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs `turnbon judge` with its parsed flags; returns the exit status."""
    import asyncio

    from turnbon_graph.analysis.judge import (
        VERDICTS_FILE,
        flagged_shares,
        judge_run,
        load_rubrics,
    )
    from turnbon_graph.analysis.judge.run_folder import (
        check_run,
        task_instructions,
        verdict_summary,
    )
    from turnbon_graph.analysis.markdown import flagged_table
    from turnbon_graph.cli.models import check_credentials
    from turnbon_graph.errors import ConfigurationError

    if args.model == STUB_MODEL:
        raise ConfigurationError(
            "--model stub cannot judge: an environment's stub policy plays the agent's model "
            "and selector, and answers no judge questions; pass a LiteLLM model id, e.g. "
            "--model openai/gpt-4o-mini, or a local OpenAI-compatible server with "
            "--model openai/NAME --api-base http://localhost:8000/v1"
        )
    run_dir: Path = args.run
    check_run(run_dir, args.model, args.settings)
    connection = {"api_base": args.api_base} if args.api_base else {}
    check_credentials(args.model, connection)
    rubrics = load_rubrics(extra=args.rubrics or None)
    instructions, note = task_instructions(run_dir, args.tasks)
    if note is not None:
        print(f"turnbon judge: note: {note}", file=sys.stderr)
    print(f"Judging {run_dir} with {args.model} on {len(rubrics)} rubric(s)", flush=True)
    try:
        verdicts = asyncio.run(
            judge_run(
                run_dir,
                args.model,
                rubrics=rubrics,
                instructions=instructions,
                settings=args.settings,
                completion_kwargs=connection,
                max_concurrency=args.concurrency,
                retry_unknown=args.retry_unknown,
            )
        )
    except KeyboardInterrupt:
        print(
            f"\nStopped. The verdicts so far are in {run_dir / VERDICTS_FILE}; the same "
            "command asks only the rest.",
            file=sys.stderr,
        )
        return INTERRUPTED
    print(verdict_summary(run_dir, verdicts))
    shares = flagged_shares(verdicts, baseline=args.baseline, rubrics=rubrics)
    print()
    print(flagged_table(shares, baseline=args.baseline))
    return 0
