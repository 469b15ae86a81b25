"""The parser of `turnbon` and of each command: its errors say what was meant, its
`--help` shows every default, and each command is a subcommand of it."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from typing import Any, NoReturn

_BAD_VALUE = re.compile(r"argument [^:]+: (?!invalid choice|expected |not allowed)")
"""An error about the value given to a flag (not a choice outside its list, a missing
value, or flags given together)."""


class CommandParser(argparse.ArgumentParser):
    """The parser of `turnbon` and of each of its commands, whose errors say what was
    meant: an unknown flag is reported by the command that was given it, with its usage
    and the closest flag it has (`--trails`: did you mean --trials?); an invalid choice
    with the closest choice; a missing required flag with its `hints` entry.

    argparse hands everything after a command's name to that command's parser
    (`parse_known_args`) and reports what it left over at the top, with the top-level
    usage; so each parser notes on the namespace that it left them, and `parse_args`
    has the parser that owns them report them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hints: dict[str, str] = {}
        """Said after "the following arguments are required: FLAG", by flag."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace or argparse.Namespace())
        if extras and not hasattr(parsed, _EXTRAS_OWNER):
            setattr(parsed, _EXTRAS_OWNER, self)  # the innermost parser that left some
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        namespace, extras = self.parse_known_args(args, namespace)
        owner = vars(namespace).pop(_EXTRAS_OWNER, self)
        if extras:
            owner.error(unrecognized(extras, owner))
        return namespace

    def error(self, message: str) -> NoReturn:
        message = self.explained(message)
        if _BAD_VALUE.match(message):
            # a flag's value was refused: its one line says which and why, without the
            # usage of every other flag
            self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        super().error(message)

    def explained(self, message: str) -> str:
        """argparse's `message` with what the user probably meant."""
        words = re.findall(r"-[\w-]+", message)
        if message.startswith("the following arguments are required:") or message.endswith(
            "expected one argument"
        ):
            hints = [hint for flag, hint in self.hints.items() if flag in words]
            return f"{message} ({'; '.join(hints)})" if hints else message
        found = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            close = difflib.get_close_matches(found.group(1), choices, n=1)
            if close:
                return f"{message}; did you mean {close[0]}?"
        return message


_EXTRAS_OWNER = "_turnbon_extras_owner"


def unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """argparse's "unrecognized arguments" message, with the closest flag `parser` has
    for each unknown one."""
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    unknown = [extra.partition("=")[0] for extra in extras if extra.startswith("--")]
    guesses = []
    for given in unknown:
        close = difflib.get_close_matches(given, flags, n=1)
        if close:
            guesses.append(f"{close[0]} (for {given})" if len(unknown) > 1 else close[0])
    message = f"unrecognized arguments: {' '.join(extras)}"
    if guesses:
        message += f"; did you mean {' or '.join(guesses)}?"
    return message


def hint(parser: argparse.ArgumentParser, flag: str, text: str) -> None:
    """What `parser` says after naming `flag` as a missing required argument."""
    if isinstance(parser, CommandParser):
        parser.hints[flag] = text


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every default in `--help` (lists as typed: `1 4`), except None and False,
    which mean "not given"; a help text that names its default itself is left alone."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text
        return f"{text} (default: {shown_default(default).replace('%', '%%')})"


def shown_default(value: Any) -> str:
    """A default as `--help` shows it: a list as it is typed, `1 4`."""
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def subcommand(commands: Any, name: str, **options: Any) -> argparse.ArgumentParser:
    """A subcommand's parser whose `--help` shows every default."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, formatter_class=HelpFormatter, **options
    )
    return parser
