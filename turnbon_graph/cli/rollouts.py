"""`turnbon rollouts`: value every candidate by branch rollouts on live episodes; the
flags become a `RolloutBudget`, and `turnbon_graph.analysis.rollouts.sweep` runs and resumes."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.run_folder import resume_command
from turnbon_graph.cli.flags.shared import SHARED, add_flags, episode_arguments
from turnbon_graph.cli.flags.values import INTERRUPTED, positive_int

if TYPE_CHECKING:
    from collections.abc import Sequence

    from turnbon_graph.analysis.rollouts import RolloutBudget, RolloutReport


def add_parser(commands: Any) -> None:
    """Adds `turnbon rollouts` and its flags to `commands`."""
    parser = command_parser(commands, "rollouts")
    episode_arguments(parser, selector="the main episode's selector, whose picks are measured")
    SHARED["n"].add(parser)
    SHARED["trials"].add(parser)
    parser.add_argument(
        "--rollouts",
        type=positive_int,
        default=1,
        metavar="R",
        help="rollouts per distinct candidate action",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--turns",
        type=positive_int,
        nargs="+",
        metavar="T",
        help="branch at these turns, 1-based (default: every turn)",
    )
    which.add_argument(
        "--sample-turns",
        type=positive_int,
        metavar="K",
        help="branch at K turns drawn per episode (seeded) from 1 to --horizon",
    )
    parser.add_argument(
        "--horizon",
        type=positive_int,
        metavar="H",
        help="with --sample-turns: the turns drawn from, 1 to H (default: the task's turn "
        "limit); set it to a typical episode's length, or most draws fall after the end",
    )
    parser.add_argument(
        "--max-rollouts",
        type=positive_int,
        metavar="M",
        help="no new rollout starts once M have started, over the whole run",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="T",
        help="no new rollout starts once the rollouts spent T tokens (those running finish)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="RUN",
        help="a `turnbon bench` run folder of this model, to estimate the tokens beforehand",
    )
    SHARED["run"].add(
        parser,
        help="where rollouts.jsonl goes, e.g. the bench run of this model, so `turnbon "
        "analyze` shows both; the same command with it resumes (default: "
        "runs/<env>-rollouts-<model>-<time>)",
    )
    SHARED["concurrency"].add(parser, help="rollouts at once; episodes run one after another")
    SHARED["ray"].add(
        parser,
        help="run the episodes on Ray workers, one episode and its rollouts per worker at a "
        "time (the `ray` extra): alone, a local Ray instance on every core of this machine; "
        "'auto' or host:port joins that cluster (docs/ray.md) (default: this process only)",
    )
    add_flags(parser, "cluster_max_concurrency", "cluster_rate_limit")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan and stop before starting"
    )
    SHARED["seed"].add(
        parser,
        help="which turns --sample-turns draws, the selector's shuffle, the random selector "
        "and the stub policy (--model stub)",
    )
    parser.set_defaults(handler=run)


def rollout_budget(args: argparse.Namespace) -> RolloutBudget:
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
            seed=args.seed,
        )
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigurationError(f"invalid rollout settings: {problem}") from None


def run(args: argparse.Namespace) -> int:
    """Runs `turnbon rollouts` with its parsed flags; returns the exit status."""
    import asyncio
    import contextlib
    import functools

    from turnbon_graph.cli.models import (
        check_run_credentials,
        connection,
        engine_options,
        episode_setup,
    )

    budget = rollout_budget(args)
    setup = episode_setup(args, kind="rollouts")  # the model ids checked first
    from turnbon_graph.analysis.markdown import rollout_table
    from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE
    from turnbon_graph.analysis.rollouts.sweep import (
        branch_all,
        plan,
        progress,
        reports_of,
        selector_label,
    )
    from turnbon_graph.bench.environment import chosen_tasks
    from turnbon_graph.turn.engine import TurnEngine

    environment, run_dir, model, selector = (
        setup.environment,
        setup.run_dir,
        setup.model,
        setup.selector,
    )
    tasks = chosen_tasks(environment, args.task)
    label = selector_label(selector, model)
    state = progress(
        run_dir, environment, tasks, args.trials, n=args.n, selector=label, budget=budget
    )
    if state.skipped:
        print(
            f"Resuming: {state.skipped} episode(s) already in {run_dir / ROLLOUTS_FILE} are "
            "skipped; their rollouts and tokens count toward --max-rollouts and --max-tokens.",
            flush=True,
        )
    if state.todo:
        print(plan(budget, args.n, state.todo, tasks, args.profile), flush=True)
    if args.dry_run:
        print("Dry run: nothing started.")
        return 0
    if state.todo:
        with contextlib.ExitStack() as stack:
            options = engine_options(args, selector, connection(args, environment, stack))
            check_run_credentials(args, model, selector, options)

            async def branch() -> None:
                runner: Any
                if args.ray is None:
                    engine = TurnEngine.from_options(model, n=args.n, selector=selector, **options)
                    runner = functools.partial(branch_all, environment, engine)
                else:  # each worker builds the engine from its recipe
                    from turnbon_graph.analysis.rollouts.on_ray import branch_all_on_ray
                    from turnbon_graph.bench.running.ray_runner import on_ray_as_asked

                    on_workers, ray = on_ray_as_asked(args, environment)
                    recipe = (model, args.n, selector, options)
                    runner = functools.partial(branch_all_on_ray, on_workers, recipe, ray=ray)
                await runner(
                    state.todo,
                    budget,
                    state.spend(),
                    concurrency=args.concurrency,
                    run_dir=run_dir,
                )

            print(f"Run folder: {run_dir}", flush=True)
            try:
                asyncio.run(branch())
            except KeyboardInterrupt:
                # asyncio.run cancelled the episode in flight; finished ones are on disk.
                print(
                    f"\nStopped. Finished episodes are saved in {run_dir / ROLLOUTS_FILE}; "
                    f"resume with:\n  {resume_command(args.argv, run_dir)}",
                    file=sys.stderr,
                )
                return INTERRUPTED
    reports = reports_of(run_dir, environment.name, args.n, label, budget)
    print()
    print(rollout_table(reports))
    print(f"With the run's other analyses: turnbon analyze {shlex.quote(str(run_dir))}")
    return 1 if all_failed(reports, model) else 0


def all_failed(reports: Sequence[RolloutReport], model: str | None = None) -> bool:
    """Says (on stderr) how many episodes ended in an agent error and the first one's
    message; True when every one did, so nothing was valued (a broken model id, key or
    endpoint, or a task that cannot start: not a result), after saying what to do about
    it (`failures.advice`; a rerun into the same folder skips recorded episodes)."""
    from turnbon_graph.cli.failures import Failed, advice

    errors = [r for r in reports if r.outcome == "agent_error"]
    if errors:
        print(
            f"{len(errors)} of {len(reports)} episode(s) ended in an agent error; the first: "
            f"{errors[0].error or 'no message'}",
            file=sys.stderr,
        )
    if len(errors) < len(reports):
        return False
    failed = [Failed(r.task, r.error, r.main_turns) for r in errors]
    settings = ", ".join(dict.fromkeys(f"N={r.n}" for r in errors)) or "this run"
    print(
        "No episode produced a report with a verdict, so no candidate was valued. "
        + advice(failed, settings, model, ""),
        file=sys.stderr,
    )
    return True
