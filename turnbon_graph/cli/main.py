"""The `turnbon` parser and entry point: each command module adds its subparser, with the
function that runs it. Imports stay inside the commands so `--help` answers at once."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from turnbon_graph import __version__
from turnbon_graph.cli import analyze, bench, judge, report, rollouts, serve
from turnbon_graph.cli import run as run_command
from turnbon_graph.cli.flags.parser import CommandParser

Handler = Callable[[argparse.Namespace], int]
COMMANDS_GROUP = "turnbon.commands"
"""Entry-point group of commands integrations add: each a `main(argv) -> int` run with
the command's arguments (turnbon_terminal adds `turnbon images`)."""


def build_parser() -> argparse.ArgumentParser:
    """`turnbon` and its commands, each a `CommandParser`: a mistake is reported by the
    command it was made in, with that command's usage and what was probably meant."""
    parser = CommandParser(
        prog="turnbon",
        description="Turn-level best-of-N sampling for LangGraph agents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for command in (run_command, bench, report, judge, analyze, rollouts, serve):
        command.add_parser(commands)
    for added in entry_points(group=COMMANDS_GROUP):  # installed integrations' commands
        add_external(commands, added)
    return parser


def add_external(commands: Any, command: EntryPoint) -> None:
    """An installed integration's command, as git runs its external commands: its
    arguments go, unparsed, to its `main(argv) -> int`, loaded only when it runs (so
    `turnbon --help` imports no integration)."""
    package = command.value.partition(".")[0].partition(":")[0]
    parser = commands.add_parser(
        command.name,
        help=f"a command of {package} (turnbon {command.name} --help)",
        add_help=False,
        prefix_chars="\0",  # every argument, flags too, is the command's own
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER)
    parser.set_defaults(handler=lambda args: int(command.load()(args.arguments)))


def main(argv: list[str] | None = None) -> int:
    """The `turnbon` command: runs the subcommand `argv` names; a user's mistake is one line on
    stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv  # for the resume hints of bench and rollouts
    from turnbon_graph.errors import TurnBoNError

    handler: Handler = args.handler
    try:
        return handler(args)
    except TurnBoNError as exc:
        print(f"turnbon {args.command}: error: {exc}", file=sys.stderr)
        return 2
