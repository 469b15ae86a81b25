"""`turnbon run` (a task folder, a shipped task or an inline instruction) and `turnbon demo`
(a small shipped task): one task solved turn by turn, shown live."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.bench.agents import as_expected, is_reference
from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.shared import SHARED, add_flags
from turnbon_graph.cli.flags.values import INTERRUPTED, positive_int

if TYPE_CHECKING:
    from turnbon_graph.bench.environment import Environment, TaskSpec
    from turnbon_graph.bench.episode import EpisodeEnd

DEMO_TASK = "largest-file"

EXIT_CODES = (
    "exit codes: 0 every trial passed (or, with no verifier, ran to its end); 1 some "
    "trial failed or ended in an error (a time limit, a failed model call); with --agent "
    "oracle or nop, 0 when every trial ended as on a sound task (oracle PASS, nop FAIL), "
    "else 1; 2 bad input (an unknown task, a bad flag or --config file); 130 stopped with "
    "Ctrl-C"
)

LIVE_MODEL_HELP = (
    "a LiteLLM model id (e.g. openai/gpt-4o-mini), or 'stub': a scripted stand-in, no "
    "model at all (default: the embedded local model, SmolLM2-135M; `make setup-local`)"
)


def live_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, sampling and trial flags `demo` and `run` share (see `SHARED`)."""
    SHARED["model"].add(parser, help=LIVE_MODEL_HELP)
    add_flags(parser, "n", "selector", "selector_api_base", "api_base")
    add_flags(parser, "temperature", "tool_calling", "timeout", "trials", "seed")


def add_parser(commands: Any) -> None:
    """`turnbon demo` and `turnbon run`."""
    demo_parser = command_parser(
        commands,
        "demo",
        epilog="exit codes: 0 every episode ran to its verdict, pass or fail; 1 one ended in "
        "an error (a time limit, a failed model call); 2 bad input (an unknown task, a bad "
        "flag); 130 stopped with Ctrl-C",
    )
    live_arguments(demo_parser)
    demo_parser.add_argument("--task", default=DEMO_TASK, metavar="ID", help="a shipped task id")
    demo_parser.add_argument(
        "--max-turns", type=positive_int, default=4, metavar="T", help="turns before stopping"
    )
    demo_parser.set_defaults(handler=demo)

    parser = command_parser(commands, "run", epilog=EXIT_CODES)
    run_arguments(parser)
    parser.set_defaults(handler=run)


def run_arguments(parser: argparse.ArgumentParser) -> None:
    """`turnbon run`'s flags (with `argument_default=SUPPRESS`: only those given)."""
    parser.add_argument("task", nargs="?", metavar="TASK", help="a task folder or shipped task id")
    parser.add_argument("--instruction", metavar="TEXT", help="what to do, instead of a TASK")
    parser.add_argument(
        "--workdir", metavar="DIR", help="with --instruction: start in a copy of DIR"
    )
    parser.add_argument(
        "--keep-workdir",
        action="store_true",
        help="keep a copy of the agent's working directory and print where it is",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="a TOML file of these settings")
    add_flags(parser, "env", "sandbox", "shell", "force_build", "agent")
    live_arguments(parser)
    parser.add_argument(
        "--max-turns", type=positive_int, metavar="T", help="default: the task's own limit"
    )


def _run_defaults() -> dict[str, Any]:
    parser = argparse.ArgumentParser(add_help=False)
    run_arguments(parser)
    defaults = vars(parser.parse_args([]))
    del defaults["config"]  # where settings come from, not one of them
    return defaults


RUN_DEFAULTS = _run_defaults()
"""`turnbon run`'s settings and defaults, as its flags declare them (`run_arguments`); a
--config file may set any of them."""


def given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags, not left at their defaults (so a --config file's
    values stand): the command line parsed again by a parser without defaults."""
    argv: list[str] | None = getattr(args, "argv", None)
    if argv is None or not argv or argv[0] != "run":
        return {k: v for k, v in vars(args).items() if k in RUN_DEFAULTS}
    strict = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    run_arguments(strict)
    return {k: v for k, v in vars(strict.parse_args(argv[1:])).items() if k in RUN_DEFAULTS}


def demo(args: argparse.Namespace) -> int:
    """`turnbon demo`: one episode of a shipped terminal task."""
    import asyncio

    from turnbon_graph.bench.registry import load_environment
    from turnbon_graph.errors import ConfigurationError

    environment = load_environment("terminal", None)
    tasks = {t.id: t for t in environment.tasks()}
    if args.task not in tasks:
        raise ConfigurationError(
            f"no task {args.task!r}; shipped tasks: {', '.join(sorted(tasks))}"
        )
    check_live_models(args.model, args.selector, args.api_base, args.selector_api_base)
    from turnbon_graph.cli.live import LiveOptions, run_live  # LangGraph: once checked

    options = LiveOptions(
        model=args.model,
        n=args.n,
        selector=args.selector,
        max_turns=args.max_turns,
        trials=args.trials,
        seed=args.seed,
        api_base=args.api_base,
        selector_api_base=args.selector_api_base,
        temperature=args.temperature,
        tool_calling=args.tool_calling,
        timeout=args.timeout,
    )
    ends = asyncio.run(run_live(environment, tasks[args.task], options))
    return 0 if all(e.outcome in (None, "pass", "wrong_submission") for e in ends) else 1


def run(args: argparse.Namespace) -> int:
    """`turnbon run`: the settings' task, each trial shown live."""
    import asyncio

    settings = run_settings(args)
    environment, spec = _task(settings)
    if is_reference(settings["agent"]):
        from turnbon_graph.cli.live import run_reference_live

        refuse_model_flags(settings, given_settings(args))
        try:
            checked = asyncio.run(
                run_reference_live(
                    environment,
                    spec,
                    settings["agent"],
                    trials=settings["trials"],
                    keep_workdir=bool(settings["keep_workdir"]),
                )
            )
        except KeyboardInterrupt:
            print("\nStopped.", file=sys.stderr)
            return INTERRUPTED
        return 0 if all(as_expected(e.outcome, settings["agent"]) for e in checked) else 1
    check_live_models(
        settings["model"],
        settings["selector"],
        settings["api_base"],
        settings["selector_api_base"],
    )
    from turnbon_graph.cli.live import LiveOptions, run_live  # LangGraph: once checked

    options = LiveOptions(
        model=settings["model"],
        n=settings["n"],
        selector=settings["selector"],
        max_turns=settings["max_turns"],
        trials=settings["trials"],
        seed=settings["seed"],
        api_base=settings["api_base"],
        selector_api_base=settings["selector_api_base"],
        temperature=settings["temperature"],
        tool_calling=settings["tool_calling"],
        timeout=settings["timeout"],
        keep_workdir=bool(settings["keep_workdir"]),
    )
    try:
        ends: list[EpisodeEnd] = asyncio.run(run_live(environment, spec, options))
    except KeyboardInterrupt:
        print("\nStopped.", file=sys.stderr)
        return INTERRUPTED
    return 0 if all(e.outcome in (None, "pass") for e in ends) else 1


MODEL_FLAGS = ("model", "n", "selector", "selector_api_base", "api_base", "temperature")
"""What a reference agent (`--agent oracle|nop`) has no use for: it calls no model."""


def refuse_model_flags(settings: dict[str, Any], given: dict[str, Any]) -> None:
    """Refuses the model's flags beside a reference agent, which would silently ignore
    them (from the command line or the --config file)."""
    from turnbon_graph.errors import ConfigurationError

    named = [k for k in MODEL_FLAGS if k in given or settings[k] != RUN_DEFAULTS[k]]
    if named:
        flags = ", ".join("--" + k.replace("_", "-") for k in named)
        raise ConfigurationError(
            f"--agent {settings['agent']} calls no model, so {flags} would be ignored: "
            "drop them, or use --agent turnbon"
        )


def check_live_models(
    model: str | None, selector: str | None, api_base: str | None, selector_api_base: str | None
) -> None:
    """The model ids of `demo` and `run`, checked before the backend starts or the task
    is shown (`models.check_model_ids`; LiteLLM is imported only if there is one)."""
    from turnbon_graph.cli.models import check_model_ids, make_selector

    check_model_ids(
        model, make_selector(selector), api_base=api_base, selector_api_base=selector_api_base
    )


def check_config_values(path: Path, values: dict[str, Any]) -> None:
    """Holds a --config file's values to the rules of the flags they stand for: the same
    type, the same choices, the same converter (`--n 0` and `n = 0` are refused alike).
    An error names the file, the key, the value and what is allowed."""
    from turnbon_graph.errors import ConfigurationError

    parser = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    run_arguments(parser)
    actions = {action.dest: action for action in parser._actions}
    for key, value in values.items():
        action = actions.get(key)
        if action is None:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            allowed, ok = "true or false", isinstance(value, bool)
        elif action.type is float:
            allowed = "a number"
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif action.type in (int, positive_int):
            allowed = "a whole number" + (" of at least 1" if action.type is positive_int else "")
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            allowed, ok = "a string", isinstance(value, str)
        if ok and action.choices is not None and value not in action.choices:
            allowed, ok = "one of " + ", ".join(map(str, action.choices)), False
        if ok and callable(action.type) and action.type not in (str, float, int):
            try:
                action.type(str(value))
            except (argparse.ArgumentTypeError, ValueError) as exc:
                if allowed == "a string":  # a name the converter refused says why itself
                    raise ConfigurationError(f"{path}: {key} = {value!r}: {exc}") from None
                allowed, ok = str(exc) or allowed, False
        if not ok:
            raise ConfigurationError(f"{path}: {key} = {value!r}: must be {allowed}")


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flags over the --config file over `RUN_DEFAULTS`; paths in the file are relative
    to the file."""
    from turnbon_graph.errors import ConfigurationError

    settings = dict(RUN_DEFAULTS)
    config: Path | None = getattr(args, "config", None)
    if config is not None:
        import tomllib

        try:
            with config.open("rb") as handle:
                values = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigurationError(f"no config file at {config}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{config} is not valid TOML: {exc}") from None
        unknown = sorted(set(values) - set(RUN_DEFAULTS))
        if unknown:
            raise ConfigurationError(
                f"{config}: unknown setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(RUN_DEFAULTS)}"
            )
        check_config_values(config, values)
        for key in ("task", "workdir"):
            value = values.get(key)
            if isinstance(value, str) and (config.parent / value).exists():
                values[key] = str(config.parent / value)
        settings.update(values)
    settings.update(given_settings(args))
    if (settings["task"] is None) == (settings["instruction"] is None):
        raise ConfigurationError("give either a TASK (folder or shipped id) or --instruction")
    if settings["workdir"] is not None and settings["instruction"] is None:
        raise ConfigurationError("--workdir goes with --instruction (a TASK brings its files)")
    for key in ("n", "trials"):
        if not isinstance(settings[key], int) or settings[key] < 1:
            raise ConfigurationError(f"{key} must be a whole number of at least 1")
    return settings


def _task(settings: dict[str, Any]) -> tuple[Environment, TaskSpec]:
    """The environment and the task the settings name: an inline instruction, a task
    folder, or a task id of the environment."""
    from turnbon_graph.bench.registry import load_environment
    from turnbon_graph.cli.flags.shared import environment_options
    from turnbon_graph.errors import ConfigurationError

    name = settings["env"]
    options = environment_options(settings)
    if settings["instruction"] is not None:
        environment = load_environment(name, None, options=options)
        add = getattr(environment, "add_instruction", None)
        if not callable(add):
            raise ConfigurationError(f"environment {name!r} cannot take an inline instruction")
        spec: TaskSpec = add(
            settings["instruction"],
            workdir=settings["workdir"],
            max_turns=settings["max_turns"] or 30,
        )
        return environment, spec
    task = str(settings["task"])
    folder = Path(task)
    environment = load_environment(name, task if folder.is_dir() else None, options=options)
    tasks = {t.id: t for t in environment.tasks()}
    if folder.is_dir():
        if len(tasks) != 1:
            raise ConfigurationError(
                f"{folder} holds {len(tasks)} tasks ({', '.join(sorted(tasks))}); "
                "give one task folder"
            )
        return environment, next(iter(tasks.values()))
    if task in tasks:
        return environment, tasks[task]
    raise ConfigurationError(
        f"{task!r} is neither a folder nor a task of {name!r} (shipped: "
        f"{', '.join(sorted(tasks))}); for a task in your own words, pass --instruction TEXT"
    )
