"""`turnbon bench --agent oracle|nop`: a task set checked by the reference agents
(`bench.reference`), with no model: which tasks' own solution does not pass, and which
pass with nothing done."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from turnbon_graph.bench.agents import sound_ending, unsound_tasks
from turnbon_graph.bench.report.reference import ending, verifier_tail
from turnbon_graph.cli.flags.run_folder import default_run_dir
from turnbon_graph.cli.flags.values import MODEL_HINT
from turnbon_graph.cli.models import EpisodeSetup

if TYPE_CHECKING:
    from turnbon_graph.bench.running.plan import BenchConfig

TAKEN = frozenset(
    {"env", "tasks", "sandbox", "task", "trials", "concurrency", "run", "seed", "ray"}
    | {
        "shell",
        "force_build",
        "redo_errors",
        "agent",
        "command",
        "handler",
        "argv",
        "flag_defaults",
    }
)
"""What a reference agent's bench run takes; every other flag (the model's, the
strategies', -n) is refused beside it: it calls no model and runs one setting, itself."""


def reference_setup(args: argparse.Namespace) -> EpisodeSetup:
    """The environment and run folder of a reference agent's bench run (named
    `<env>-<agent>-<time>` by default); refuses the flags it would ignore.

    Raises:
        ConfigurationError: a model or search flag was given.
    """
    from turnbon_graph.bench.registry import load_environment
    from turnbon_graph.cli.flags.shared import environment_options
    from turnbon_graph.errors import ConfigurationError

    defaults = args.flag_defaults
    given = [k for k, v in vars(args).items() if k not in TAKEN and v != defaults.get(k)]
    if given:
        flags = ", ".join("-n" if k == "n" else "--" + k.replace("_", "-") for k in given)
        raise ConfigurationError(
            f"--agent {args.agent} calls no model and runs one setting, itself, so {flags} "
            "would be ignored: drop them, or use --agent turnbon"
        )
    environment = load_environment(args.env, args.tasks, options=environment_options(args))
    return EpisodeSetup(
        selector=None,
        environment=environment,
        model=args.agent,
        run_dir=args.run or default_run_dir(args.env, args.agent),
    )


def require_model(args: argparse.Namespace) -> None:
    """Turn-BoN's runs need --model (argparse cannot ask: a reference agent takes none).

    Raises:
        ConfigurationError: no --model.
    """
    from turnbon_graph.errors import ConfigurationError

    if args.model is None:
        raise ConfigurationError(
            f"the following arguments are required: --model ({MODEL_HINT}; or --agent "
            "oracle / --agent nop to check a task set with no model)"
        )


def reference_config(args: argparse.Namespace) -> BenchConfig:
    """The run of a reference agent: one setting named after it, no model."""
    from turnbon_graph.bench.running.plan import BenchConfig

    return BenchConfig(
        model=args.agent,
        n_values=[1],
        trials=args.trials,
        concurrency=args.concurrency,
        redo_errors=args.redo_errors,
        agent=args.agent,
    )


def task_check(results: list[Any], agent: str) -> list[str]:
    """Prints which tasks did not end as on a sound task (the oracle did not pass, or
    nop did not fail), each with how it ended and the end of the verifier's output;
    returns their ids (on stdout: it is the run's finding)."""
    wrong = unsound_tasks(results, agent)
    tasks = {row.task for row in results}
    expected = sound_ending(agent)
    if not wrong:
        print(f"Task check: every task of {len(tasks)} {expected} under {agent}, as it should")
        return []
    print(
        f"Task check: {len(wrong)} of {len(tasks)} tasks do not end as they should under "
        f"{agent} (a sound task {expected}):"
    )
    for task, rows in wrong.items():
        print(f"- {task}: {ending(rows, results)}")
        for line in verifier_tail(rows[0]):
            print(f"    {line}")
    sys.stdout.flush()
    return list(wrong)
