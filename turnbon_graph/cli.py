"""The `turnbon` command. Imports stay inside the commands so `--help` answers at once."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import ExitStack
    from importlib.metadata import EntryPoint

    from turnbon_graph.environment import Environment
    from turnbon_graph.selectors.base import Selector

ENVIRONMENTS_GROUP = "turnbon.environments"
"""Entry-point group of environment factories, `(spec: str | None) -> Environment`."""

SIMPLE_SELECTORS = ("first", "random", "majority")
STUB_MODEL = "stub"
INTERRUPTED = 130  # the shell's code for a run stopped by Ctrl-C


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turnbon",
        description="Turn-level best-of-N sampling for LangGraph agents.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="solve a small terminal task turn by turn, showing every candidate and choice",
        description=(
            "Solve a small shipped terminal task with Turn-BoN, printing each turn's "
            "candidates, the choice and why, and the command's output, then the verifier's "
            "verdict and the tokens used. Without --model it runs on the embedded local model "
            "(SmolLM2-135M, no API key; `make setup-local`); --model stub runs a scripted "
            "stand-in with no model at all. Exits 0 when the episode ran, pass or fail."
        ),
    )
    demo.add_argument(
        "--model", help="a LiteLLM model id (e.g. openai/gpt-4o-mini), or 'stub'; default: local"
    )
    demo.add_argument("--selector", help="a LiteLLM model id for the selector (default: --model)")
    demo.add_argument("-n", type=int, default=4, help="candidates per turn (default 4)")
    demo.add_argument("--task", default="largest-file", help="a shipped task id")
    demo.add_argument("--max-turns", type=int, default=4, help="turns before stopping (default 4)")
    demo.add_argument("--seed", type=int, default=0)
    _run_parser(commands)
    _bench_parser(commands)
    _report_parser(commands)
    return parser


RUN_DEFAULTS: dict[str, Any] = {
    "task": None,
    "instruction": None,
    "workdir": None,
    "env": "terminal",
    "model": None,
    "n": 4,
    "selector": None,
    "selector_api_base": None,
    "api_base": None,
    "temperature": None,
    "tool_calling": None,
    "trials": 1,
    "max_turns": None,
    "seed": 0,
}
"""`turnbon run`'s settings and defaults; a --config file may set any of them."""


def _run_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="solve a task folder or an inline instruction turn by turn, shown live",
        description=(
            "Solve one task with Turn-BoN, printing each turn's candidates, the choice and "
            "why, and the command's output, then the verifier's verdict. TASK is a task "
            "folder (Terminal-Bench 2 layout) or a shipped task id; or give --instruction "
            "(no verifier), optionally starting in a copy of --workdir. Settings come from "
            "flags, a TOML --config file with the same names (snake_case), then defaults; "
            "without --model it runs on the embedded local model (`make setup-local`)."
        ),
        argument_default=argparse.SUPPRESS,  # unset flags leave --config values alone
    )
    run.add_argument("task", nargs="?", metavar="TASK", help="a task folder or shipped task id")
    run.add_argument("--instruction", metavar="TEXT", help="what to do, instead of a TASK")
    run.add_argument("--workdir", metavar="DIR", help="with --instruction: start in a copy of DIR")
    run.add_argument("--config", type=Path, metavar="FILE", help="a TOML file of these settings")
    run.add_argument("--env", metavar="NAME", help="environment (default: terminal)")
    run.add_argument(
        "--model", help="a LiteLLM model id, or 'stub'; default: the embedded local model"
    )
    run.add_argument("-n", type=_positive_int, help="candidates per turn (default 4)")
    run.add_argument(
        "--selector",
        metavar="MODEL|first|random|majority",
        help="a LiteLLM model id for an LLM selector, or a selector that calls no model "
        "(default: an LLM selector on the generator's model)",
    )
    run.add_argument("--selector-api-base", metavar="URL", help="api_base for --selector MODEL")
    run.add_argument("--api-base", metavar="URL", help="api_base for the generator's calls")
    run.add_argument("--temperature", type=float, metavar="T", help="generator temperature")
    run.add_argument(
        "--tool-calling",
        choices=("auto", "native", "prompted"),
        help="native tool calls, tools in the prompt with a JSON answer, or auto (default)",
    )
    run.add_argument("--trials", type=_positive_int, metavar="K", help="episodes (default 1)")
    run.add_argument(
        "--max-turns", type=_positive_int, metavar="T", help="default: the task's own limit"
    )
    run.add_argument("--seed", type=int)


def _bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="run an environment's tasks for each N and trial into a run folder",
        description=(
            "Run every task of an environment for each N and trial, saving each finished "
            "episode to a run folder. Interrupted runs resume: run the same command with "
            "--run DIR. Environments come from installed packages (entry-point group "
            f"'{ENVIRONMENTS_GROUP}')."
        ),
        allow_abbrev=False,  # the resume hint rewrites --run; abbreviations would dodge it
    )
    bench.add_argument("--env", required=True, metavar="NAME", help="environment name")
    bench.add_argument(
        "--tasks", metavar="SPEC", help="passed to the environment (which task set, a path, ...)"
    )
    bench.add_argument(
        "--model",
        required=True,
        help=(
            "a LiteLLM model id, or 'stub': the environment's own scripted stub policy on a "
            "loopback server (no API key, no network)"
        ),
    )
    bench.add_argument(
        "--n",
        type=_positive_int,
        nargs="+",
        default=[1, 4],
        metavar="N",
        help="candidates per turn, one setting each; N=1 is the baseline (default: 1 4)",
    )
    bench.add_argument(
        "--selector",
        metavar="MODEL|first|random|majority",
        help="a LiteLLM model id for an LLM selector, or a selector that calls no model "
        "(default: an LLM selector on --model)",
    )
    bench.add_argument(
        "--selector-api-base",
        metavar="URL",
        help="api_base for a --selector model id (the default selector shares --api-base)",
    )
    bench.add_argument(
        "--trials", type=_positive_int, default=1, metavar="K", help="attempts per task and N"
    )
    bench.add_argument(
        "--concurrency", type=_positive_int, default=4, metavar="C", help="episodes at once"
    )
    bench.add_argument(
        "--task",
        action="extend",
        nargs="+",
        metavar="ID",
        help="run only these task ids (default: all)",
    )
    bench.add_argument(
        "--run", type=Path, metavar="DIR", help="run folder (default: runs/<env>-<model>-<time>)"
    )
    bench.add_argument("--api-base", metavar="URL", help="api_base for the generator's calls")
    bench.add_argument("--timeout", type=float, metavar="S", help="per model call, in seconds")
    bench.add_argument("--seed", type=int, help="selector shuffles and the random selector")


def _report_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="write a Markdown report with tables and plots for a run folder",
        description=(
            "Write report.md (pass rates, pass@k, consistency, cost, outcomes, turns to "
            "solve, paired bootstrap against the baseline, per-task results) and PNG plots."
        ),
    )
    report.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    report.add_argument("--out", type=Path, metavar="DIR", help="default: RUN/report")
    report.add_argument(
        "--baseline", default="N=1", metavar="SETTING", help="compare against it (default N=1)"
    )
    report.add_argument(
        "--resamples",
        type=_positive_int,
        default=10_000,
        metavar="K",
        help="bootstrap resamples (default 10000)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    # LiteLLM otherwise fetches its price list from the internet at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from turnbon_graph.errors import TurnBoNError

    try:
        if args.command == "demo":
            from turnbon_graph.demo import run_demo

            asyncio.run(
                run_demo(
                    model=args.model,
                    n=args.n,
                    selector=args.selector,
                    task=args.task,
                    max_turns=args.max_turns,
                    seed=args.seed,
                )
            )
            return 0
        if args.command == "run":
            return _run(args)
        if args.command == "bench":
            return _bench(args, argv)
        if args.command == "report":
            return _report(args)
    except TurnBoNError as exc:
        print(f"turnbon {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 2


# ----------------------------------------------------------------------------- run


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
        for key in ("task", "workdir"):
            value = values.get(key)
            if isinstance(value, str) and (config.parent / value).exists():
                values[key] = str(config.parent / value)
        settings.update(values)
    settings.update({k: v for k, v in vars(args).items() if k in RUN_DEFAULTS})
    if (settings["task"] is None) == (settings["instruction"] is None):
        raise ConfigurationError("give either a TASK (folder or shipped id) or --instruction")
    if settings["workdir"] is not None and settings["instruction"] is None:
        raise ConfigurationError("--workdir goes with --instruction (a TASK brings its files)")
    for key in ("n", "trials"):
        if not isinstance(settings[key], int) or settings[key] < 1:
            raise ConfigurationError(f"{key} must be a whole number of at least 1")
    return settings


def _run(args: argparse.Namespace) -> int:
    from turnbon_graph.demo import LiveOptions, run_live
    from turnbon_graph.errors import ConfigurationError

    settings = run_settings(args)
    name = settings["env"]
    if settings["instruction"] is not None:
        environment = load_environment(name, None)
        add = getattr(environment, "add_instruction", None)
        if not callable(add):
            raise ConfigurationError(f"environment {name!r} cannot take an inline instruction")
        spec = add(
            settings["instruction"],
            workdir=settings["workdir"],
            max_turns=settings["max_turns"] or 30,
        )
    else:
        task = str(settings["task"])
        folder = Path(task)
        environment = load_environment(name, task if folder.is_dir() else None)
        tasks = {t.id: t for t in environment.tasks()}
        if folder.is_dir():
            if len(tasks) != 1:
                raise ConfigurationError(
                    f"{folder} holds {len(tasks)} tasks ({', '.join(sorted(tasks))}); "
                    "give one task folder"
                )
            spec = next(iter(tasks.values()))
        elif task in tasks:
            spec = tasks[task]
        else:
            raise ConfigurationError(
                f"{task!r} is neither a folder nor a task of {name!r} "
                f"(shipped: {', '.join(sorted(tasks))})"
            )
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
    )
    try:
        verdicts = asyncio.run(run_live(environment, spec, options))
    except KeyboardInterrupt:
        print("\nStopped.", file=sys.stderr)
        return INTERRUPTED
    return 0 if all(v is None or v.passed for v in verdicts) else 1


# ----------------------------------------------------------------------------- report


def _report(args: argparse.Namespace) -> int:
    from turnbon_graph.report import write_report

    path = write_report(args.run, args.out, baseline=args.baseline, resamples=args.resamples)
    print(path)
    return 0


# ----------------------------------------------------------------------------- bench


def environment_entry_points() -> list[EntryPoint]:
    from importlib.metadata import entry_points

    return list(entry_points(group=ENVIRONMENTS_GROUP))


def load_environment(
    name: str, spec: str | None, available: Iterable[EntryPoint] | None = None
) -> Environment:
    """The environment an installed package registers as `name`, built from `spec`."""
    from turnbon_graph.environment import Environment
    from turnbon_graph.errors import ConfigurationError

    found = {ep.name: ep for ep in (environment_entry_points() if available is None else available)}
    if name not in found:
        listed = ", ".join(sorted(found)) or "none installed"
        raise ConfigurationError(
            f"unknown environment {name!r} (available: {listed}); install a package that "
            f"registers it under the entry-point group '{ENVIRONMENTS_GROUP}'"
        )
    entry = found[name]
    try:
        factory = entry.load()
    except Exception as exc:
        raise ConfigurationError(
            f"environment {name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}; "
            "is the package that provides it installed completely?"
        ) from exc
    environment = factory(spec)
    if not isinstance(environment, Environment):
        raise ConfigurationError(
            f"environment {name!r} ({entry.value}) returned {type(environment).__name__}, "
            "which lacks name, tasks() or start(); its factory must return an Environment"
        )
    return environment


def make_selector(name: str | None, seed: int | None = None) -> str | Selector | None:
    """first/random/majority -> that selector; any other name is a LiteLLM model id for
    an LLMSelector (built by the engine, so it shares its client); None -> the default."""
    from turnbon_graph.selectors.simple import (
        FirstSelector,
        MajorityVoteSelector,
        RandomSelector,
    )

    if name == "first":
        return FirstSelector()
    if name == "random":
        return RandomSelector(seed)
    if name == "majority":
        return MajorityVoteSelector()
    return name


def default_run_dir(env: str, model: str, now: datetime | None = None) -> Path:
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


def _bench(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import contextlib

    from turnbon_graph.errors import ConfigurationError
    from turnbon_graph.report import TIMES, one_line_summary, read_settings, setting_order
    from turnbon_graph.runner import BenchConfig, run_benchmark

    selector = make_selector(args.selector, args.seed)
    if args.selector_api_base and not isinstance(selector, str):
        raise ConfigurationError(
            "--selector-api-base applies only to a selector model id; pass --selector MODEL"
        )
    if args.api_base and args.model == STUB_MODEL:
        raise ConfigurationError(
            "--api-base has no effect with --model stub (the stub serves on loopback); "
            "drop it, or name a real model"
        )
    environment = load_environment(args.env, args.tasks)
    run_dir: Path = args.run or default_run_dir(args.env, args.model)
    with contextlib.ExitStack() as stack:
        if args.model == STUB_MODEL:
            model, connection = "openai/stub", _start_stub(environment, args.env, stack)
        else:
            model, connection = args.model, {"api_base": args.api_base} if args.api_base else {}
        config = BenchConfig(
            model=model,
            n_values=sorted(set(args.n)),
            selector=selector,
            trials=args.trials,
            concurrency=args.concurrency,
            engine_options=_engine_options(args, selector, connection),
        )
        count = len(args.task) if args.task else len(environment.tasks())
        settings = ", ".join(f"N={n}" for n in config.n_values)
        print(f"Run folder: {run_dir}", flush=True)
        print(
            f"{environment.name}: {count} task(s) {TIMES} {args.trials} trial(s) {TIMES} "
            f"{settings} on {model}",
            flush=True,
        )
        try:
            results = asyncio.run(
                run_benchmark(environment, config, run_dir, tasks=args.task or None)
            )
        except KeyboardInterrupt:
            # asyncio.run cancelled the episodes in flight; finished ones are on disk.
            print(
                f"\nStopped. Finished episodes are saved in {run_dir}; resume with:\n"
                f"  {resume_command(argv, run_dir)}",
                file=sys.stderr,
            )
            return INTERRUPTED
    order = setting_order(results, read_settings(run_dir))
    print(f"{len(results)} episodes · {one_line_summary(results, order)}")
    print(f"Report: turnbon report {shlex.quote(str(run_dir))}")
    return 0


def _start_stub(environment: object, name: str, stack: ExitStack) -> dict[str, Any]:
    """A loopback stub scripted by the environment's own policy; its connection options."""
    from turnbon_graph.errors import ConfigurationError
    from turnbon_graph.testing import StubServer

    policy = getattr(environment, "stub_policy", None)
    if not callable(policy):
        raise ConfigurationError(
            f"environment {name!r} has no stub policy (a stub_policy() method), so --model "
            "stub cannot play its model; pass a LiteLLM model id instead, e.g. "
            "--model openai/gpt-4o-mini"
        )
    server = stack.enter_context(StubServer())
    server.script(policy())
    return {"api_base": server.base_url, "api_key": "none"}


def _engine_options(
    args: argparse.Namespace, selector: str | Selector | None, connection: dict[str, Any]
) -> dict[str, Any]:
    options: dict[str, Any] = {"completion_kwargs": dict(connection)}
    if isinstance(selector, str):
        # A selector model id does not share the generator's endpoint (it may be another
        # provider), except on the stub, where there is no other endpoint.
        if args.model == STUB_MODEL:
            options["selector_kwargs"] = dict(connection)
        elif args.selector_api_base:
            options["selector_kwargs"] = {"api_base": args.selector_api_base}
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.seed is not None:
        options["seed"] = args.seed
    return options


if __name__ == "__main__":
    sys.exit(main())
