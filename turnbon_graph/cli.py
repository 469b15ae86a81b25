"""The `turnbon` command. Imports stay inside the commands so `--help` answers at once."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import ExitStack
    from importlib.metadata import EntryPoint

    from turnbon_graph.bench.environment import Environment
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
    _judge_parser(commands)
    _analyze_parser(commands)
    _rollouts_parser(commands)
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
    _episode_arguments(bench, selector="the selector")
    bench.add_argument(
        "--n",
        type=_positive_int,
        nargs="+",
        default=[1, 4],
        metavar="N",
        help="candidates per turn, one setting each; N=1 is the baseline (default: 1 4)",
    )
    bench.add_argument(
        "--trials", type=_positive_int, default=1, metavar="K", help="attempts per task and N"
    )
    bench.add_argument(
        "--concurrency", type=_positive_int, default=4, metavar="C", help="episodes at once"
    )
    bench.add_argument(
        "--run", type=Path, metavar="DIR", help="run folder (default: runs/<env>-<model>-<time>)"
    )
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
    _run_folder_arguments(report, "RUN/report")


def _judge_parser(commands: Any) -> None:
    judge = commands.add_parser(
        "judge",
        help="ask an LLM judge yes/no rubric questions about every attempt of a run folder",
        description=(
            "Judge every finished attempt of a run folder on each rubric: a yes/no answer "
            "with evidence citing turns, one call per attempt and rubric. The shipped rubrics "
            "(looping, reward hacking, ...) apply, changed or extended by --rubrics files. "
            "Verdicts are appended to RUN/judge.jsonl as they arrive and a rerun asks only "
            "what is missing. The judge sees each task's instruction, taken from the run's "
            "environment. Then prints the share of attempts flagged per rubric and setting "
            "against the baseline, with a paired bootstrap over tasks (the paper's Table 3)."
        ),
    )
    judge.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    judge.add_argument(
        "--model",
        required=True,
        help="a LiteLLM model id for the judge, e.g. openai/gpt-4o-mini (not 'stub': no "
        "stub policy answers judge questions)",
    )
    judge.add_argument(
        "--rubrics",
        type=Path,
        nargs="+",
        action="extend",
        metavar="FILE",
        help="YAML rubric files applied over the shipped ones in order: an entry with a "
        "shipped id changes the fields it gives, a new id is added, `enabled: false` drops one",
    )
    judge.add_argument(
        "--settings",
        nargs="+",
        action="extend",
        metavar="SETTING",
        help="judge only these settings, e.g. N=1 N=4 (default: all)",
    )
    judge.add_argument(
        "--baseline", default="N=1", metavar="SETTING", help="compare against it (default N=1)"
    )
    judge.add_argument(
        "--tasks",
        metavar="SPEC",
        help="the --tasks SPEC the run was made with, to find its tasks' instructions",
    )
    judge.add_argument(
        "--api-base",
        metavar="URL",
        help="api_base for the judge's calls, e.g. a local OpenAI-compatible server: "
        "--model openai/NAME --api-base http://localhost:8000/v1",
    )
    judge.add_argument(
        "--concurrency",
        type=_positive_int,
        default=8,
        metavar="C",
        help="judge calls at once (default 8)",
    )
    judge.add_argument(
        "--retry-unknown",
        action="store_true",
        help="ask again where an earlier verdict is unknown (no valid answer, or the call failed)",
    )


def _analyze_parser(commands: Any) -> None:
    analyze = commands.add_parser(
        "analyze",
        help="write what the selector prefers (Figures 4, 5), the judge's and the rollouts' "
        "findings for a run folder",
        description=(
            "Write analysis.md for a run folder: which behaviours the selector's picks show "
            "against the share expected from a random pick (the paper's Figure 4), and how "
            "long the picked actions are against the unpicked ones and the baseline's "
            "(Figure 5), each with a paired bootstrap over tasks; then the judge's flagged "
            "shares (Table 3) when `turnbon judge` wrote RUN/judge.jsonl, and the branch "
            "rollouts' measures when `turnbon rollouts` wrote RUN/rollouts.jsonl."
        ),
    )
    _run_folder_arguments(analyze, "RUN/analysis")
    analyze.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")


def _rollouts_parser(commands: Any) -> None:
    rollouts = commands.add_parser(
        "rollouts",
        help="value every candidate by branch rollouts: does the pool hold a good action, "
        "and does the selector pick it",
        description=(
            "Run live episodes of an environment's tasks with Turn-BoN and, at the chosen "
            "turns, fork the episode once per distinct candidate action: force it, continue "
            "with one candidate a turn to the end and verify. A candidate's value is its "
            "mean pass over R rollouts; per turn, oracle (the best value), realised (the "
            "pick's), mu (the mean), headroom capture h = (realised - mu) / (oracle - mu) "
            "and the scores' rank correlation with the values rho_v. Prints the plan before "
            "starting (tokens too with --profile); each episode's report is appended to "
            "RUN/rollouts.jsonl, and the same command with --run DIR resumes. The episodes "
            "must be forkable (the terminal environment's are)."
        ),
        allow_abbrev=False,  # the resume hint rewrites --run; abbreviations would dodge it
    )
    _episode_arguments(rollouts, selector="the main episode's selector, whose picks are measured")
    rollouts.add_argument(
        "-n", type=_positive_int, default=4, help="candidates per turn (default 4)"
    )
    rollouts.add_argument(
        "--trials", type=_positive_int, default=1, metavar="K", help="episodes per task (default 1)"
    )
    rollouts.add_argument(
        "--rollouts",
        type=_positive_int,
        default=1,
        metavar="R",
        help="rollouts per distinct candidate action (default 1)",
    )
    which = rollouts.add_mutually_exclusive_group()
    which.add_argument(
        "--turns",
        type=_positive_int,
        nargs="+",
        metavar="T",
        help="branch at these turns, 1-based (default: every turn)",
    )
    which.add_argument(
        "--sample-turns",
        type=_positive_int,
        metavar="K",
        help="branch at K turns drawn per episode (seeded) from 1 to --horizon",
    )
    rollouts.add_argument(
        "--horizon",
        type=_positive_int,
        metavar="H",
        help="with --sample-turns: the turns drawn from, 1 to H (default: the task's turn "
        "limit); set it to a typical episode's length, or most draws fall after the end",
    )
    rollouts.add_argument(
        "--max-rollouts",
        type=_positive_int,
        metavar="M",
        help="no new rollout starts once M have started, over the whole run",
    )
    rollouts.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="T",
        help="no new rollout starts once the rollouts spent T tokens (those running finish)",
    )
    rollouts.add_argument(
        "--profile",
        type=Path,
        metavar="RUN",
        help="a `turnbon bench` run folder of this model, to estimate the tokens beforehand",
    )
    rollouts.add_argument(
        "--run",
        type=Path,
        metavar="DIR",
        help="where rollouts.jsonl goes, e.g. the bench run of this model, so `turnbon "
        "analyze` shows both (default: runs/<env>-rollouts-<model>-<time>)",
    )
    rollouts.add_argument(
        "--concurrency",
        type=_positive_int,
        default=2,
        metavar="C",
        help="rollouts at once (default 2); episodes run one after another",
    )
    rollouts.add_argument(
        "--dry-run", action="store_true", help="print the plan and stop before starting"
    )
    rollouts.add_argument(
        "--seed", type=int, metavar="S", help="which turns --sample-turns draws, selector shuffles"
    )


def _episode_arguments(parser: argparse.ArgumentParser, *, selector: str) -> None:
    """Which environment, tasks, model and selector: what running episodes takes."""
    parser.add_argument("--env", required=True, metavar="NAME", help="environment name")
    parser.add_argument(
        "--tasks", metavar="SPEC", help="passed to the environment (which task set, a path, ...)"
    )
    parser.add_argument(
        "--task",
        action="extend",
        nargs="+",
        metavar="ID",
        help="run only these task ids (default: all)",
    )
    parser.add_argument(
        "--model",
        required=True,
        help=(
            "a LiteLLM model id, or 'stub': the environment's own scripted stub policy on a "
            "loopback server (no API key, no network)"
        ),
    )
    parser.add_argument(
        "--selector",
        metavar="MODEL|first|random|majority",
        help=f"{selector}: a LiteLLM model id, or a selector that calls no model "
        "(default: an LLM selector on --model)",
    )
    parser.add_argument(
        "--selector-api-base",
        metavar="URL",
        help="api_base for a --selector model id (the default selector shares --api-base)",
    )
    parser.add_argument("--api-base", metavar="URL", help="api_base for the generator's calls")
    parser.add_argument("--timeout", type=float, metavar="S", help="per model call, in seconds")


def _run_folder_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """RUN, --out, --baseline and --resamples: what reading a run folder's results takes."""
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    parser.add_argument("--out", type=Path, metavar="DIR", help=f"default: {out}")
    parser.add_argument(
        "--baseline", default="N=1", metavar="SETTING", help="compare against it (default N=1)"
    )
    parser.add_argument(
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
        if args.command == "judge":
            return _judge(args)
        if args.command == "analyze":
            return _analyze(args)
        if args.command == "rollouts":
            return _rollouts(args, argv)
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
    from turnbon_graph.bench.report import write_report

    path = write_report(args.run, args.out, baseline=args.baseline, resamples=args.resamples)
    print(path)
    return 0


# ----------------------------------------------------------------------------- judge

FLAGGED_COLUMNS = (
    "rubric",
    "setting",
    "judged",
    "flagged",
    "unknown",
    "share",
    "tasks",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
)
"""Table 3's columns, as named by `FlaggedShare`."""


def _judge(args: argparse.Namespace) -> int:
    from collections import Counter

    from turnbon_graph.analysis.judge import (
        VERDICTS_FILE,
        flagged_shares,
        judge_run,
        load_rubrics,
        read_verdicts,
    )
    from turnbon_graph.bench.runs import read_episodes
    from turnbon_graph.errors import ConfigurationError

    if args.model == STUB_MODEL:
        raise ConfigurationError(
            "--model stub cannot judge: an environment's stub policy plays the agent's model "
            "and selector, and answers no judge questions; pass a LiteLLM model id, e.g. "
            "--model openai/gpt-4o-mini, or a local OpenAI-compatible server with "
            "--model openai/NAME --api-base http://localhost:8000/v1"
        )
    run: Path = args.run
    _require_episodes(run)
    rubrics = load_rubrics(extra=args.rubrics or None)
    recorded = sorted({r.setting for r in read_episodes(run)})
    unknown = sorted(set(args.settings or ()) - set(recorded))
    if unknown:
        raise ConfigurationError(
            f"{run} has no setting {', '.join(unknown)} (it has {', '.join(recorded)})"
        )
    others = sorted({v.model for v in read_verdicts(run) if v.model != args.model})
    if others:
        raise ConfigurationError(
            f"{run / VERDICTS_FILE} holds verdicts of another judge model "
            f"({', '.join(others)}); pass --model {others[0]} to go on with it, or move the "
            f"file aside to judge with {args.model}"
        )
    instructions, note = _instructions(run, args.tasks)
    if note is not None:
        print(f"turnbon judge: note: {note}", file=sys.stderr)
    print(f"Judging {run} with {args.model} on {len(rubrics)} rubric(s)", flush=True)
    try:
        verdicts = asyncio.run(
            judge_run(
                run,
                args.model,
                rubrics=rubrics,
                instructions=instructions,
                settings=args.settings,
                completion_kwargs={"api_base": args.api_base} if args.api_base else {},
                max_concurrency=args.concurrency,
                retry_unknown=args.retry_unknown,
            )
        )
    except KeyboardInterrupt:
        print(
            f"\nStopped. The verdicts so far are in {run / VERDICTS_FILE}; the same command "
            "asks only the rest.",
            file=sys.stderr,
        )
        return INTERRUPTED
    counts = {a: sum(v.answer == a for v in verdicts) for a in ("yes", "no", "unknown")}
    print(
        f"{len(verdicts)} verdicts in {run / VERDICTS_FILE}: {counts['yes']} yes, "
        f"{counts['no']} no, {counts['unknown']} unknown"
    )
    if counts["unknown"]:
        errors = Counter(v.error or "" for v in verdicts if v.answer == "unknown")
        error, times = errors.most_common(1)[0]
        error = _without_secrets(error[:300] + (" ..." if len(error) > 300 else ""))
        print(
            f"An unknown verdict had no valid answer or its call failed; the most common "
            f"reason ({times} of {counts['unknown']}): {error}\nFix the cause, then the same "
            "command with --retry-unknown asks them again."
        )
    shares = flagged_shares(verdicts, baseline=args.baseline, rubrics=rubrics)
    print()
    print(_flagged_table(shares, baseline=args.baseline))
    return 0


def _without_secrets(text: str) -> str:
    """`text` with the environment's keys and tokens (OPENAI_API_KEY, ...) masked."""
    from turnbon_graph.client import redact, secret_values

    return redact(text, secret_values({}))


def _require_episodes(run: Path) -> None:
    from turnbon_graph.bench.runs import EPISODES_FILE
    from turnbon_graph.errors import ConfigurationError

    if not (run / EPISODES_FILE).is_file():
        raise ConfigurationError(
            f"{run} is not a run folder with episodes (it has no {EPISODES_FILE}); pass the "
            "folder that `turnbon bench` printed when it started"
        )


def _instructions(run: Path, tasks: str | None) -> tuple[dict[str, str], str | None]:
    """Task id -> instruction, from the environment the run's settings name; and a note
    when some or all instructions are missing (the judge then goes without them)."""
    from turnbon_graph.bench.runs import SETTINGS_FILE, RunSettings, read_episodes

    path = run / SETTINGS_FILE
    try:
        settings = RunSettings.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not readable run settings"
        return {}, (
            f"cannot tell the run's environment from {path} ({reason}); judging without "
            "the task instructions"
        )
    name = settings.environment
    try:
        found = {t.id: t.instruction for t in load_environment(name, tasks).tasks()}
    except Exception as exc:  # any failure costs the judge only the instructions
        return {}, (
            f"environment {name!r} did not load ({type(exc).__name__}: {exc}); judging "
            "without the task instructions"
        )
    missing = sorted({r.task for r in read_episodes(run)} - found.keys())
    if missing:
        listed = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        return found, (
            f"{len(missing)} task(s) of the run are not in environment {name!r} ({listed}): "
            "judging those without their instructions; pass --tasks SPEC as given to bench"
        )
    return found, None


def _flagged_table(shares: Sequence[Any], *, baseline: str) -> str:
    """Table 3 as Markdown, from `flagged_shares`: the share flagged per rubric and setting."""
    from turnbon_graph.analysis.preference import markdown_table

    if not shares:
        return "No verdicts."
    rows = [{c: getattr(s, c) for c in FLAGGED_COLUMNS} for s in shares]
    passed = sorted({s.rubric for s in shares if s.applies_to == "passed"})
    note = (
        f"share = flagged / judged (unknown verdicts left out); difference, its 95% interval "
        f"and p_value: per task, the share here minus in {baseline}, bootstrapped over the "
        "tasks judged in both."
    )
    if passed:
        note += f" {', '.join(passed)}: judged on passing attempts only."
    return f"{markdown_table(rows)}\n\n{note}"


# ----------------------------------------------------------------------------- analyze

PREFERENCE_COLUMNS = (
    "setting",
    "behaviour",
    "turns",
    "informative_turns",
    "tasks",
    "picked_share",
    "chance_share",
    "gap",
    "task_gap",
    "ci_low",
    "ci_high",
    "p_value",
)
"""Figure 4's columns, as named by `BehaviourPreference.to_row`."""

LENGTH_COLUMNS = (
    "setting",
    "metric",
    "turns",
    "tasks",
    "picked",
    "unpicked",
    "baseline",
    "vs_unpicked_difference",
    "vs_unpicked_p_value",
    "vs_baseline_difference",
    "vs_baseline_p_value",
)
"""Figure 5's columns, as named by `LengthComparison.to_row`."""


def _analyze(args: argparse.Namespace) -> int:
    from turnbon_graph.analysis.judge import VERDICTS_FILE
    from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE
    from turnbon_graph.bench.runs import EPISODES_FILE
    from turnbon_graph.errors import ConfigurationError

    run: Path = args.run
    if not any((run / name).is_file() for name in (EPISODES_FILE, VERDICTS_FILE, ROLLOUTS_FILE)):
        raise ConfigurationError(
            f"{run} is not a run folder (it has no {EPISODES_FILE}, {VERDICTS_FILE} or "
            f"{ROLLOUTS_FILE}); pass the folder that `turnbon bench` or `turnbon rollouts` "
            "printed when it started"
        )
    out: Path = args.out or run / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    text = analysis_markdown(
        run, out, baseline=args.baseline, resamples=args.resamples, seed=args.seed
    )
    path = out / "analysis.md"
    path.write_text(text, encoding="utf-8")
    print(path)
    return 0


class _Figures:
    """Draws the analyses' PNGs into `out`, beside analysis.md, when matplotlib (the
    `plots` extra) is installed; each `image` is the Markdown that shows one, or nothing."""

    def __init__(self, out: Path | None) -> None:
        from turnbon_graph.bench.plots import plots_available

        self.out = out if out is not None and plots_available() else None
        self.skipped = out is not None and self.out is None

    def image(self, name: str, alt: str, draw: Callable[[], Any]) -> list[str]:
        if self.out is None:
            return []
        try:
            figure = draw()
        except ValueError:  # nothing to draw (e.g. no complete branched turn)
            return []
        # tight: a long title or legend of a narrow figure is kept, not clipped
        figure.savefig(self.out / f"{name}.png", format="png", bbox_inches="tight")
        return [f"![{alt}]({name}.png)"]


def analysis_markdown(
    run: Path, out: Path | None = None, *, baseline: str, resamples: int, seed: int
) -> str:
    """analysis.md: Figures 4 and 5 as tables, Table 3 and the rollouts when recorded;
    with `out`, their plots are drawn there (when matplotlib is installed)."""
    from turnbon_graph.analysis.judge import flagged_shares, read_verdicts
    from turnbon_graph.analysis.rollouts import read_reports
    from turnbon_graph.analysis.trajectories import load_trajectories

    figures = _Figures(out)
    trajectories = load_trajectories(run)
    parts = [f"# Analysis of {run}", *_run_line(run)]
    if figures.skipped:
        from turnbon_graph.bench.plots import PLOTS_INSTALL

        parts.append(
            f"> Plots were skipped: matplotlib is not installed. Install it with "
            f"`{PLOTS_INSTALL}` and run `turnbon analyze {run}` again."
        )
    if trajectories:
        parts += _preference_section(trajectories, figures, resamples=resamples, seed=seed)
        parts += _length_section(
            trajectories, figures, baseline=baseline, resamples=resamples, seed=seed
        )
    else:
        parts.append(
            "No recorded episodes here (`turnbon bench` records them), so no analysis of the "
            "selector's picks (Figures 4 and 5)."
        )
    verdicts = read_verdicts(run)
    if verdicts:
        from turnbon_graph.analysis.figures import plot_flagged

        shares = flagged_shares(verdicts, baseline=baseline, resamples=resamples, seed=seed)
        parts += [
            "## What the judge flagged (Table 3)",
            "The share of attempts the judge (`turnbon judge`, "
            f"{', '.join(sorted({v.model for v in verdicts}))}) answered yes per rubric and "
            "setting.",
            _flagged_table(shares, baseline=baseline),
            *figures.image("table3_flagged", "Flagged shares", lambda: plot_flagged(shares)),
        ]
    reports = read_reports(run)
    if reports:
        from turnbon_graph.analysis import figures as plots

        parts += [
            "## Branch rollouts: exploration and exploitation",
            "From `turnbon rollouts`: at each branched turn every distinct candidate action "
            "was forced and continued to the verifier; its value is its mean pass. Means over "
            "the complete branched turns (every candidate valued): oracle (the best value: is "
            "a good action in the pool?), realised (the selector's pick), mu (a random pick), "
            "h = (realised - mu) / (oracle - mu) where oracle > mu (1: the best pick, 0: no "
            "better than random), rho_v (Spearman of a scoring selector's scores against the "
            "values, pooled).",
            rollout_table(reports),
            *figures.image(
                "rollouts_oracle_realised",
                "Oracle, realised and mu",
                lambda: plots.plot_oracle_realised(reports),
            ),
            *figures.image(
                "rollouts_headroom", "Headroom capture", lambda: plots.plot_headroom(reports)
            ),
            *figures.image(
                "rollouts_h_vs_rho", "h against rho_v", lambda: plots.plot_h_vs_rho(reports)
            ),
        ]
    return "\n\n".join(parts) + "\n"


def _run_line(run: Path) -> list[str]:
    from turnbon_graph.bench.runs import SETTINGS_FILE, RunSettings

    try:
        s = RunSettings.model_validate_json((run / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    settings = ", ".join(f"N={n}" for n in s.n_values)
    return [
        f"Environment {s.environment}, model {s.model}, selector {s.selector}; {settings}; "
        f"{len(s.tasks)} task(s) x {s.trials} trial(s)."
    ]


def _preference_section(
    trajectories: Sequence[Any], figures: _Figures, *, resamples: int, seed: int
) -> list[str]:
    from turnbon_graph.analysis.preference import behaviour_preference, markdown_table

    title = "## Which behaviours the selector picks (Figure 4)"
    try:
        results = behaviour_preference(trajectories, resamples=resamples, seed=seed)
    except ValueError as exc:
        return [title, f"Not available: {exc}."]
    from turnbon_graph.analysis.figures import plot_preference

    rows = [{c: r.to_row()[c] for c in PREFERENCE_COLUMNS} for r in results]
    return [
        title,
        "Per setting with N>1 and behaviour: picked_share is the share of turns whose "
        "executed pick shows the behaviour, chance_share the share expected from a uniform "
        "random pick among the turn's candidates. task_gap (each task counted once) is "
        f"tested by a paired bootstrap over tasks ({resamples} resamples, seed {seed}): "
        "ci_low..ci_high is its 95% interval, p_value two-sided. informative_turns: turns "
        "whose candidates disagree on the behaviour (the others add nothing to the gap).",
        markdown_table(rows),
        _left_out(results),
        *figures.image(
            "figure4_preference", "Picked vs chance per behaviour", lambda: plot_preference(results)
        ),
    ]


def _length_section(
    trajectories: Sequence[Any], figures: _Figures, *, baseline: str, resamples: int, seed: int
) -> list[str]:
    from turnbon_graph.analysis.preference import length_comparison, markdown_table

    title = "## How long the picked actions are (Figure 5)"
    try:
        results = length_comparison(trajectories, baseline=baseline, resamples=resamples, seed=seed)
    except ValueError as exc:
        return [title, f"Not available: {exc}."]
    from turnbon_graph.analysis.figures import plot_lengths

    rows = [{c: r.to_row()[c] for c in LENGTH_COLUMNS} for r in results]
    return [
        title,
        "Per turn, the reasoning tokens and shell-command characters of the picked "
        "candidate, the mean of the turn's unpicked candidates, and the executed action of "
        f"the baseline ({baseline}). vs_unpicked: picked minus unpicked within each turn; "
        "vs_baseline: picked minus baseline per task; both bootstrapped over tasks.",
        markdown_table(rows),
        _left_out(results),
        *figures.image("figure5_lengths", "Action lengths", lambda: plot_lengths(results)),
    ]


def _left_out(results: Sequence[Any]) -> str:
    """Which turns the analyses left out, per setting (the same for every row of one)."""
    seen: dict[str, tuple[int, int]] = {}
    for r in results:
        seen.setdefault(r.setting, (r.synthesized_turns, r.rule_turns))
    parts = [
        f"{setting}: {synthesized} turn(s) whose action the selector wrote, {rule} picked by "
        "a rule (fallback or early commit)"
        for setting, (synthesized, rule) in seen.items()
    ]
    return "Left out: " + "; ".join(parts) + "."


def rollout_table(reports: Sequence[Any]) -> str:
    """The rollouts' measures as Markdown: one row per setting and selector."""
    from turnbon_graph.analysis.preference import markdown_table
    from turnbon_graph.analysis.rollouts import summarise

    groups: dict[tuple[int, str], list[Any]] = {}
    for report in reports:
        groups.setdefault((report.n, report.selector), []).append(report)
    rows = []
    for (n, selector), group in sorted(groups.items()):
        s = summarise(t for r in group for t in r.turns)
        rows.append(
            {
                "setting": f"N={n}",
                "selector": selector,
                "episodes": len(group),
                "passed": sum(r.outcome == "pass" for r in group),
                "branched_turns": s.turns,
                "complete_turns": s.complete_turns,
                "oracle": s.mean_oracle,
                "realised": s.mean_realised,
                "mu": s.mean_mu,
                "h": s.mean_h,
                "h_turns": s.h_turns,
                "rho_v": s.rho_v,
                "rollouts": s.rollouts,
                "skipped_rollouts": s.skipped_rollouts,
                "tokens": s.tokens,
            }
        )
    return markdown_table(rows)


# ----------------------------------------------------------------------------- bench


def environment_entry_points() -> list[EntryPoint]:
    from importlib.metadata import entry_points

    return list(entry_points(group=ENVIRONMENTS_GROUP))


def load_environment(
    name: str, spec: str | None, available: Iterable[EntryPoint] | None = None
) -> Environment:
    """The environment an installed package registers as `name`, built from `spec`."""
    from turnbon_graph.bench.environment import Environment
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

    from turnbon_graph.bench.report import TIMES, one_line_summary, read_settings, setting_order
    from turnbon_graph.bench.runner import BenchConfig, run_benchmark

    selector = make_selector(args.selector, args.seed)
    _refuse_ignored_flags(args, selector)
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


def _refuse_ignored_flags(args: argparse.Namespace, selector: str | Selector | None) -> None:
    """Connection flags that would have no effect are an error, not silently dropped."""
    from turnbon_graph.errors import ConfigurationError

    selector_kwargs(selector, None, args.selector_api_base)  # refuses a useless flag
    if args.api_base and args.model == STUB_MODEL:
        raise ConfigurationError(
            "--api-base has no effect with --model stub (the stub serves on loopback); "
            "drop it, or name a real model"
        )


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


def selector_kwargs(
    selector: str | Selector | None,
    local_endpoint: dict[str, Any] | None,
    selector_api_base: str | None,
) -> dict[str, Any] | None:
    """The connection of a selector model id: `selector_api_base` if given, else the
    generator's endpoint when it is local (the stub, the embedded model), where there is no
    other; else None (it may be another provider: LiteLLM finds its own). Refuses
    `selector_api_base` for a selector that calls no model id."""
    from turnbon_graph.errors import ConfigurationError

    if not isinstance(selector, str):
        if selector_api_base:
            raise ConfigurationError(
                "--selector-api-base applies only to a selector model id; pass --selector MODEL"
            )
        return None
    if selector_api_base:
        return {"api_base": selector_api_base}
    return dict(local_endpoint) if local_endpoint else None


def _engine_options(
    args: argparse.Namespace, selector: str | Selector | None, connection: dict[str, Any]
) -> dict[str, Any]:
    options: dict[str, Any] = {"completion_kwargs": dict(connection)}
    local = connection if args.model == STUB_MODEL else None
    if (kwargs := selector_kwargs(selector, local, args.selector_api_base)) is not None:
        options["selector_kwargs"] = kwargs
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.seed is not None:
        options["seed"] = args.seed
    return options


# ----------------------------------------------------------------------------- rollouts


def rollout_budget(args: argparse.Namespace) -> Any:
    """The `RolloutBudget` the flags ask for."""
    from pydantic import ValidationError

    from turnbon_graph.analysis.rollouts import RolloutBudget
    from turnbon_graph.errors import ConfigurationError

    if args.horizon is not None and args.sample_turns is None:
        raise ConfigurationError(
            "--horizon goes with --sample-turns (it is the range the turns are drawn from); "
            "add --sample-turns K, or drop --horizon"
        )
    try:
        return RolloutBudget(
            turns=sorted(set(args.turns)) if args.turns else None,
            sample_turns=args.sample_turns,
            horizon=args.horizon,
            rollouts=args.rollouts,
            max_rollouts=args.max_rollouts,
            max_tokens=args.max_tokens,
            seed=args.seed if args.seed is not None else 0,
        )
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigurationError(f"invalid rollout settings: {problem}") from None


def _selector_label(selector: str | Selector | None, model: str) -> str:
    """The name the engine's selector will have (an LLM selector is `llm:<model id>`), so
    a rerun can tell its own reports before building the engine."""
    if selector is None or isinstance(selector, str):
        return f"llm:{selector or model}"
    return selector.name


def _rollouts(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import contextlib

    from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, Spend, read_reports

    budget = rollout_budget(args)
    selector = make_selector(args.selector, args.seed)
    _refuse_ignored_flags(args, selector)
    environment = load_environment(args.env, args.tasks)
    tasks = _chosen_tasks(environment, args.task)
    run_dir: Path = args.run or default_run_dir(f"{args.env}-rollouts", args.model)
    model = "openai/stub" if args.model == STUB_MODEL else args.model
    label = _selector_label(selector, model)

    def mine(report: Any) -> bool:  # a report of this command, from an earlier attempt
        return (report.environment, report.n, report.selector, report.budget) == (
            environment.name,
            args.n,
            label,
            budget,
        )

    earlier = [r for r in read_reports(run_dir) if mine(r)]
    done = {(r.task, r.trial) for r in earlier}
    todo = [
        (task, trial)
        for task in tasks
        for trial in range(args.trials)
        if (task.id, trial) not in done
    ]
    skipped = len(tasks) * args.trials - len(todo)
    if skipped:
        print(
            f"Resuming: {skipped} episode(s) already in {run_dir / ROLLOUTS_FILE} are "
            "skipped; their rollouts and tokens count toward --max-rollouts and --max-tokens.",
            flush=True,
        )
    if todo:
        print(_plan(args, budget, todo, tasks), flush=True)
    if args.dry_run:
        print("Dry run: nothing started.")
        return 0
    if todo:
        spend = Spend(
            rollouts=sum(len(t.rollouts) for r in earlier for t in r.turns),
            tokens=sum(r.tokens for r in earlier),
        )
        with contextlib.ExitStack() as stack:
            if args.model == STUB_MODEL:
                connection = _start_stub(environment, args.env, stack)
            else:
                connection = {"api_base": args.api_base} if args.api_base else {}
            print(f"Run folder: {run_dir}", flush=True)
            try:
                asyncio.run(
                    _branch_all(
                        environment,
                        model,
                        args.n,
                        selector,
                        _engine_options(args, selector, connection),
                        todo,
                        budget,
                        spend,
                        args.concurrency,
                        run_dir,
                    )
                )
            except KeyboardInterrupt:
                # asyncio.run cancelled the episode in flight; finished ones are on disk.
                print(
                    f"\nStopped. Finished episodes are saved in {run_dir / ROLLOUTS_FILE}; "
                    f"resume with:\n  {resume_command(argv, run_dir)}",
                    file=sys.stderr,
                )
                return INTERRUPTED
    reports = [r for r in read_reports(run_dir) if mine(r)]
    print()
    print(rollout_table(reports))
    print(f"With the run's other analyses: turnbon analyze {shlex.quote(str(run_dir))}")
    return 0


def _chosen_tasks(environment: Environment, ids: Sequence[str] | None) -> list[Any]:
    from turnbon_graph.errors import ConfigurationError

    available = {t.id: t for t in environment.tasks()}
    missing = [i for i in ids or () if i not in available]
    if missing:
        raise ConfigurationError(
            f"unknown task(s) {', '.join(missing)} in {environment.name}; "
            f"available: {', '.join(sorted(available))}"
        )
    return [available[i] for i in dict.fromkeys(ids)] if ids else list(available.values())


def _plan(args: argparse.Namespace, budget: Any, todo: Sequence[Any], tasks: Sequence[Any]) -> str:
    """What the run will start, at most: rollouts, and tokens when a profile is given."""
    from turnbon_graph.analysis.rollouts import UsageProfile, estimate_cost, format_plan
    from turnbon_graph.errors import ConfigurationError

    max_turns = max(t.max_turns for t in tasks)
    if args.profile is not None:
        try:
            profile = UsageProfile.from_run(args.profile)
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigurationError(
                f"--profile {args.profile}: {exc}; pass a `turnbon bench` run folder with "
                "finished episodes"
            ) from None
        estimate = estimate_cost(
            budget, n=args.n, profile=profile, episodes=len(todo), max_turns=max_turns
        )
        return format_plan(estimate)
    # Without a recorded run the episode length is unknown: count up to the turn limit.
    profile = UsageProfile(episode_turns=max_turns, tokens_per_turn=0)
    e = estimate_cost(budget, n=args.n, profile=profile, episodes=len(todo), max_turns=max_turns)
    every = budget.turns is None and budget.sample_turns is None
    lines = [
        f"Branch rollouts: {e.episodes} episode(s) x {e.turns_per_episode:g} turn(s) x "
        f"{e.candidates} candidates x {e.rollouts_per_candidate} rollout(s) -> at most "
        f"{e.rollouts} rollouts"
        + (f" (if every episode lasts the tasks' limit of {max_turns} turns)" if every else ""),
        "Tokens: not estimated without a recorded run; --profile RUN (a `turnbon bench` run "
        "folder of this model) estimates them.",
    ]
    if e.limited_by:
        lines.append(
            f"Capped by {', '.join(e.limited_by)}: no new rollout starts once it is spent."
        )
    return "\n".join(lines)


async def _branch_all(
    environment: Environment,
    model: str,
    n: int,
    selector: str | Selector | None,
    engine_options: dict[str, Any],
    todo: Sequence[tuple[Any, int]],
    budget: Any,
    spend: Any,
    concurrency: int,
    run_dir: Path,
) -> None:
    """Each episode in turn, its report appended to the run folder as it finishes."""
    from tqdm.auto import tqdm

    from turnbon_graph.analysis.rollouts import branch_rollouts, write_report
    from turnbon_graph.turn import TurnEngine

    engine = TurnEngine.from_options(model, n=n, selector=selector, **engine_options)
    bar = tqdm(total=len(todo), unit="episode", dynamic_ncols=True)
    branched = 0
    try:
        for task, trial in todo:
            report = await branch_rollouts(
                environment,
                engine,
                task,
                trial=trial,
                budget=budget,
                concurrency=concurrency,
                spend=spend,
            )
            write_report(run_dir, report)
            branched += len(report.turns)
            bar.set_postfix(
                branched_turns=branched, rollouts=spend.rollouts, tokens=spend.tokens, refresh=False
            )
            bar.update(1)
    finally:
        bar.close()


if __name__ == "__main__":
    sys.exit(main())
