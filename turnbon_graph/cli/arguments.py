"""The flags the commands share, each defined once (`SHARED`: the same names, short
forms, types and defaults in every command that takes it), the argument groups built
from them, the help formatter that shows every default, their checks, run folder names
and resume hints, and the parser class whose errors say what was meant. Only the
standard library: `turnbon --help` answers at once."""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

STUB_MODEL = "stub"
"""--model stub: the environment's own scripted stub policy on a loopback server."""
INTERRUPTED = 130
"""The shell's code for a run stopped by Ctrl-C."""
DEFAULT_ENV = "terminal"
SANDBOXES = ("bwrap", "container")
"""`--sandbox`: an option of the environment's factory (the terminal environment's)."""
ENVIRONMENT_OPTIONS = ("sandbox",)
"""The flags passed to the environment's factory as keyword arguments, when given."""
SELECTOR_KEYWORDS = ("first", "random", "majority")
"""The `--selector` names of selectors that call no model (`models.make_selector`)."""
MODEL_HINT = (
    "a LiteLLM model id such as openai/gpt-4o-mini, or --model stub to try it offline "
    "(the environment's scripted stub policy: no API key, no network)"
)
"""What a command that requires --model says when it is missing."""


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not above 0")
    return value


def share(text: str) -> float:
    """argparse type: a number above 0 and at most 1."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{value:g} is above 1")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def near_keyword(text: str, keywords: Sequence[str]) -> str | None:
    """The keyword a name with no provider prefix nearly is (`majorty`: majority, `stbu`:
    stub), or None. No model LiteLLM knows is that close to a keyword (tested against its
    model list), so no LiteLLM import is needed to tell."""
    if text in keywords or "/" in text:
        return None
    close = difflib.get_close_matches(text.lower(), keywords, n=1, cutoff=0.75)
    return close[0] if close else None


def selector_name(text: str) -> str:
    """argparse type of --selector: a keyword or a LiteLLM model id, as given. A near
    miss of a keyword (`majorty`, `First`: `near_keyword`) is refused here, with the
    keyword it resembles. Other names are model ids, checked against LiteLLM before
    anything runs."""
    meant = near_keyword(text, SELECTOR_KEYWORDS)
    if meant:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no selector: did you mean {meant}? {selector_choices()}"
        )
    return text


def model_name(text: str) -> str:
    """argparse type of --model: `stub` or a LiteLLM model id, as given. A near miss of
    `stub` (`stbu`, `Stub`: `near_keyword`) is refused here; other names are model ids,
    checked against LiteLLM before anything runs."""
    if near_keyword(text, (STUB_MODEL,)):
        raise argparse.ArgumentTypeError(
            f"{text!r} is no model id: did you mean {STUB_MODEL}? --model takes {MODEL_HINT}"
        )
    return text


def selector_choices() -> str:
    """The selectors --selector takes, in words."""
    return (
        f"(selectors that call no model: {', '.join(SELECTOR_KEYWORDS)}; anything else is "
        "a LiteLLM model id for an LLM selector, e.g. openai/gpt-4o-mini)"
    )


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
        super().error(self.explained(message))

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


@dataclass(frozen=True)
class Flag:
    """One shared flag: its option strings and `add_argument` keywords."""

    names: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def add(self, parser: argparse.ArgumentParser, **overrides: Any) -> None:
        """Adds it to `parser`; `overrides` may change only the help text and whether it
        is required. A parser with `argument_default=SUPPRESS` gets no default."""
        unknown = set(overrides) - {"help", "required"}
        if unknown:
            raise ValueError(f"a shared flag's {', '.join(sorted(unknown))} cannot change")
        options = {**self.options, **overrides}
        if parser.argument_default is argparse.SUPPRESS:
            options.pop("default", None)
        parser.add_argument(*self.names, **options)


SELECTOR_METAVAR = "|".join(("MODEL", *SELECTOR_KEYWORDS))

SHARED: dict[str, Flag] = {
    "env": Flag(
        ("--env",),
        {"default": DEFAULT_ENV, "metavar": "NAME", "help": "environment name"},
    ),
    "tasks": Flag(
        ("--tasks",),
        {"metavar": "SPEC", "help": "passed to the environment (which task set, a path, ...)"},
    ),
    "sandbox": Flag(
        ("--sandbox",),
        {
            "choices": SANDBOXES,
            "help": "where every episode runs: bwrap, the host sandbox; container, a "
            "Podman or Docker container of the task's image (default: each task where it "
            "belongs: a task with an environment/Dockerfile or docker_image in a container)",
        },
    ),
    "model": Flag(
        ("--model",),
        {
            "type": model_name,
            "metavar": "MODEL",
            "help": "a LiteLLM model id, or 'stub': the environment's own scripted stub "
            "policy on a loopback server (no API key, no network)",
        },
    ),
    "n": Flag(
        ("-n", "--n"),
        {"type": positive_int, "default": 4, "metavar": "N", "help": "candidates per turn"},
    ),
    "selector": Flag(
        ("--selector",),
        {
            "type": selector_name,
            "metavar": SELECTOR_METAVAR,
            "help": "a LiteLLM model id for an LLM selector, or a selector that calls no "
            "model (default: an LLM selector on --model)",
        },
    ),
    "selector_api_base": Flag(
        ("--selector-api-base",),
        {
            "metavar": "URL",
            "help": "api_base for a --selector model id (the default selector shares --api-base)",
        },
    ),
    "api_base": Flag(
        ("--api-base",), {"metavar": "URL", "help": "api_base for the generator's calls"}
    ),
    "temperature": Flag(
        ("--temperature",),
        {
            "type": float,
            "metavar": "T",
            "help": "the generator's sampling temperature (default: the model's, 0.9 on "
            "the embedded model)",
        },
    ),
    "tool_calling": Flag(
        ("--tool-calling",),
        {
            "choices": ("auto", "native", "prompted"),
            "help": "native tool calls, tools in the prompt with a JSON answer, or auto "
            "(default: auto; prompted on the embedded model)",
        },
    ),
    "timeout": Flag(
        ("--timeout",), {"type": float, "metavar": "S", "help": "per model call, in seconds"}
    ),
    "seed": Flag(
        ("--seed",),
        {
            "type": int,
            "default": 0,
            "metavar": "S",
            "help": "seeds the selector's shuffle of the candidates, the random selector "
            "and the stub policy (--model stub): the same seed, the same stub run",
        },
    ),
    "trials": Flag(
        ("--trials",),
        {"type": positive_int, "default": 1, "metavar": "K", "help": "episodes per task"},
    ),
    "concurrency": Flag(
        ("--concurrency",),
        {"type": positive_int, "default": 4, "metavar": "C", "help": "how many run at once"},
    ),
    "run": Flag(
        ("--run",),
        {
            "type": Path,
            "metavar": "DIR",
            "help": "run folder; the same command with it resumes (default: "
            "runs/<env>-<model>-<time>)",
        },
    ),
    "baseline": Flag(
        ("--baseline",),
        {"default": "N=1", "metavar": "SETTING", "help": "the setting compared against"},
    ),
    "resamples": Flag(
        ("--resamples",),
        {"type": positive_int, "default": 10_000, "metavar": "K", "help": "bootstrap resamples"},
    ),
    "out": Flag(("--out",), {"type": Path, "metavar": "DIR", "help": "where the files go"}),
    "ray": Flag(
        ("--ray",),
        {
            "nargs": "?",
            "const": "local",
            "default": None,
            "metavar": "ADDRESS",
            "help": "run on Ray (the `ray` extra): alone, a local Ray instance on every core "
            "of this machine; 'auto' or host:port joins that cluster (docs/ray.md) "
            "(default: this process only)",
        },
    ),
    "cluster_max_concurrency": Flag(
        ("--cluster-max-concurrency",),
        {
            "type": positive_int,
            "metavar": "N",
            "help": "with --ray: model calls in flight across all workers together (one "
            "actor hands out the slots; default: only each worker's own cap)",
        },
    ),
    "cluster_rate_limit": Flag(
        ("--cluster-rate-limit",),
        {
            "type": positive_float,
            "metavar": "R",
            "help": "with --ray: model calls a second across all workers together, e.g. a "
            "provider's rate limit (default: only each worker's own)",
        },
    ),
}
"""Every flag more than one command takes, by its `dest`."""

N_SETTINGS = Flag(
    SHARED["n"].names,
    {
        "type": positive_int,
        "nargs": "+",
        "default": [1, 4],
        "metavar": "N",
        "help": "candidates per turn, one setting each; N=1 is the baseline",
    },
)
"""`-n/--n` of the commands that compare settings (`bench`): several N, one run each."""


def add_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """The shared flags `names`, as defined in `SHARED`."""
    for name in names:
        SHARED[name].add(parser)


def environment_options(settings: Any) -> dict[str, Any]:
    """The environment flags given (`ENVIRONMENT_OPTIONS`), for its factory; `settings`
    is parsed flags or a dict of settings."""
    values = settings if isinstance(settings, dict) else vars(settings)
    return {k: values[k] for k in ENVIRONMENT_OPTIONS if values.get(k) is not None}


def episode_arguments(parser: argparse.ArgumentParser, *, selector: str) -> None:
    """Which environment, tasks, model and selector: what running episodes takes."""
    add_flags(parser, "env", "tasks", "sandbox")
    parser.add_argument(
        "--task",
        action="extend",
        nargs="+",
        metavar="ID",
        help="run only these task ids (default: all)",
    )
    SHARED["model"].add(parser, required=True)
    hint(parser, "--model", MODEL_HINT)
    SHARED["selector"].add(
        parser,
        help=f"{selector}: a LiteLLM model id, or a selector that calls no model "
        "(default: an LLM selector on --model)",
    )
    add_flags(parser, "selector_api_base", "api_base", "temperature", "tool_calling", "timeout")


def run_folder_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """RUN, --out, --baseline and --resamples: what reading a run folder's results takes."""
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    SHARED["out"].add(parser, help=f"where the files go (default: {out})")
    add_flags(parser, "baseline", "resamples")


def subcommand(commands: Any, name: str, **options: Any) -> argparse.ArgumentParser:
    """A subcommand's parser whose `--help` shows every default."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, formatter_class=HelpFormatter, **options
    )
    return parser


def default_run_dir(env: str, model: str, now: datetime | None = None) -> Path:
    """runs/<env>-<model, as a file name>-<time>."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-") or "model"
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{env}-{slug}-{stamp}"


def resume_command(argv: Sequence[str], run_dir: Path) -> str:
    """The same command with `--run run_dir` (replacing any --run it had)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--run":
            skip = True
        elif not arg.startswith("--run="):
            kept.append(arg)
    return shlex.join(["turnbon", *kept, "--run", str(run_dir)])
