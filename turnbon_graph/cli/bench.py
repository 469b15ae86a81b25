"""`turnbon bench`: an environment's tasks for each N and trial, into a run folder."""

from __future__ import annotations

import argparse
import shlex
import sys
from itertools import product
from typing import TYPE_CHECKING, Any

from turnbon_graph.cli.commands import command_parser
from turnbon_graph.cli.flags.run_folder import resume_command
from turnbon_graph.cli.flags.shared import N_SETTINGS, SHARED, add_flags, episode_arguments
from turnbon_graph.cli.flags.strategy import check_horizon, strategy_arguments
from turnbon_graph.cli.flags.values import INTERRUPTED

if TYPE_CHECKING:
    from pathlib import Path

    from turnbon_graph.bench.running.runs import EpisodeResult


def add_parser(commands: Any) -> None:
    """Adds `turnbon bench` and its flags to `commands`."""
    parser = command_parser(commands, "bench")
    episode_arguments(parser, selector="the selector", agents=True)
    N_SETTINGS.add(parser)
    SHARED["trials"].add(parser, help="attempts per task and N")
    SHARED["concurrency"].add(parser, help="episodes at once")
    add_flags(parser, "run", "seed")
    SHARED["ray"].add(
        parser,
        help="run the episodes on Ray (the `ray` extra): alone, a local Ray instance on every "
        "core of this machine; 'auto' or host:port joins that cluster (docs/ray.md) "
        "(default: this process only)",
    )
    add_flags(parser, "cluster_max_concurrency", "cluster_rate_limit")
    strategy_arguments(parser)
    parser.add_argument(
        "--redo-errors",
        action="store_true",
        help="on a resumed run, run again the episodes that ended in an agent error (after "
        "fixing a key or an endpoint); their new results replace the old",
    )
    # what a reference agent's run holds the given flags to (`reference.reference_setup`)
    defaults = {action.dest: action.default for action in parser._actions}
    parser.set_defaults(handler=run, flag_defaults=defaults)


def run(args: argparse.Namespace) -> int:
    """Runs `turnbon bench` with its parsed flags; returns the exit status."""
    import asyncio
    import contextlib

    from turnbon_graph.bench.agents import is_reference
    from turnbon_graph.cli.models import (
        check_run_credentials,
        connection,
        engine_options,
        episode_setup,
    )
    from turnbon_graph.cli.reference import (
        reference_config,
        reference_setup,
        require_model,
        task_check,
    )

    reference = is_reference(args.agent)
    if not reference:
        require_model(args)
    # the model ids checked before the rest is imported
    setup = reference_setup(args) if reference else episode_setup(args)
    environment, run_dir, model = setup.environment, setup.run_dir, setup.model
    refuse_another_model(run_dir, model)
    from turnbon_graph.bench.report.format import TIMES
    from turnbon_graph.bench.report.writer import one_line_summary, read_settings, setting_order
    from turnbon_graph.bench.running.cores import oversubscription
    from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
    from turnbon_graph.bench.running.runs import read_episodes

    with contextlib.ExitStack() as stack:
        config = reference_config(args) if reference else None
        if config is None:
            link = connection(args, environment, stack)
            options = engine_options(args, setup.selector, link)
            check_run_credentials(args, model, setup.selector, options)
            strategies, value_kwargs = strategy_of(args, link)
            n_values = fixed_n(strategies, sorted(set(args.n)))
            config = BenchConfig(
                model=model,
                n_values=n_values,
                selector=setup.selector,
                trials=args.trials,
                concurrency=args.concurrency,
                engine_options=options,
                redo_errors=args.redo_errors,
                strategy=strategies[0] if len(strategies) == 1 else None,
                strategies=strategies if len(strategies) > 1 else None,
                single_sample=args.single_sample,
                estimates_file=args.estimates,
                value_kwargs=value_kwargs,
            )
        refuse_other_settings(run_dir, [s.label for s in config.settings])
        count = len(args.task) if args.task else len(environment.tasks())
        settings = ", ".join(s.label for s in config.settings)
        print(f"Run folder: {run_dir}", flush=True)
        played = settings if reference else f"{settings} on {model}"
        print(
            f"{environment.name}: {count} task(s) {TIMES} {args.trials} trial(s) {TIMES} {played}",
            flush=True,
        )
        if args.ray is None:
            ids = args.task or [t.id for t in environment.tasks()]
            if warning := oversubscription(environment, ids, args.concurrency):
                print(f"turnbon bench: warning: {warning}", file=sys.stderr, flush=True)
        if recorded := read_episodes(run_dir):
            total = count * args.trials * len(config.settings)
            print(resuming(recorded, total, args.redo_errors, run_dir), flush=True)
        ray: Any = None
        if args.ray is not None:
            from turnbon_graph.bench.running.ray_runner import on_ray_as_asked

            environment, ray = on_ray_as_asked(args, environment)
        try:
            results = asyncio.run(
                run_benchmark(environment, config, run_dir, tasks=args.task or None, ray=ray)
            )
        except KeyboardInterrupt:
            # asyncio.run cancelled the episodes in flight; finished ones are on disk.
            print(
                f"\nStopped. Finished episodes are saved in {run_dir}; resume with:\n"
                f"  {resume_command(args.argv, run_dir)}",
                file=sys.stderr,
            )
            return INTERRUPTED
    order = setting_order(results, read_settings(run_dir))
    print(f"{len(results)} episodes · {one_line_summary(results, order)}")
    broken = agent_errors(results, order, model)
    blind = value_failures(results, order, model)
    unsound = task_check(results, args.agent) if reference else []
    print(f"Report: turnbon report {shlex.quote(str(run_dir))}")
    return 1 if broken or blind or unsound else 0


def fixed_n(strategies: list[Any], n_values: list[int]) -> list[int]:
    """The run's Ns: as given, or a strategy's one N when every strategy runs at it
    (particle filtering: N=1); says so when -n asked for others."""
    from turnbon_graph.bench.strategies.registry import strategy_kind

    fixed = {s.name: strategy_kind(s.name).n for s in strategies}
    for name, n in fixed.items():
        if n is not None and n_values != [n]:
            print(f"{name}: runs at N={n} only, whatever -n says", flush=True)
    only = set(fixed.values())
    return [n for n in only if n is not None] if len(only) == 1 and None not in only else n_values


def strategy_of(
    args: argparse.Namespace, link: dict[str, Any]
) -> tuple[list[Any], dict[str, Any] | None]:
    """The strategy flags as `StrategySpec`s, one per strategy, width, resampling
    temperature and token budget (each a setting of the run, with every N; a width or a
    temperature only for the strategies that take one), and the value model's connection:
    the stub's for `--value stub` (only with --model stub, whose server it is). A
    strategy's flag goes to the strategies it applies to; one that applies to none of them
    is refused."""
    from pydantic import ValidationError

    from turnbon_graph.bench.strategies.registry import strategy_kind
    from turnbon_graph.bench.strategies.spec import StrategySpec
    from turnbon_graph.config import configuration_error
    from turnbon_graph.errors import ConfigurationError

    names = list(dict.fromkeys(args.strategy))
    if names == ["bon"] and (args.width is not None or args.value is not None):
        raise ConfigurationError(
            "--width and --value apply to a search strategy: add --strategy beam or particle"
        )
    check_horizon(args.horizon)
    if args.budget_unit != "tokens" and not args.token_budget:
        raise ConfigurationError(
            f"--budget-unit {args.budget_unit} says what --token-budget counts: add "
            "--token-budget, or drop --budget-unit"
        )
    value, value_kwargs = value_of(args, link)
    widths = list(dict.fromkeys(args.width or [None]))
    given = {
        "width": widths[0],
        "value": value,
        "rubric": args.value_rubric,
        "horizon": args.horizon,
        "agree": args.agree,
    }
    given = {flag: v for flag, v in given.items() if v is not None}

    def applies(flag: str, name: str) -> bool:
        try:
            StrategySpec.model_validate({"name": name, flag: given[flag]})
        except ValidationError:
            return False
        return True

    specs = []
    try:
        for flag in given:
            if not any(applies(flag, name) for name in names):
                # the first strategy's check says which strategies it applies to
                StrategySpec.model_validate({"name": names[0], flag: given[flag]})
        temperatures = list(dict.fromkeys(args.value_temperature))
        for name in names:
            own = {flag: v for flag, v in given.items() if applies(flag, name)}
            kind = strategy_kind(name)
            swept = product(
                widths if "width" in own else [own.get("width")],
                temperatures if kind.resamples else [temperatures[0]],
                dict.fromkeys(args.token_budget or [None]),
            )
            for width, temperature, budget in swept:
                specs.append(
                    StrategySpec(
                        name=name,
                        value_temperature=temperature,
                        token_budget=budget,
                        budget_unit=args.budget_unit,
                        **{**own, "width": width} if width is not None else own,
                    )
                )
    except ValidationError as exc:  # a flag of another strategy: the message says which
        raise configuration_error(exc) from None
    if args.value_api_base and not any(strategy_kind(spec.name).value for spec in specs):
        raise ConfigurationError(
            "--value-api-base is the value function's endpoint, and no strategy of the run "
            "takes one: add --strategy beam, particle or lookahead, or drop it"
        )
    return specs, value_kwargs


def value_of(args: argparse.Namespace, link: dict[str, Any]) -> tuple[str | None, Any]:
    """--value as a spec's `value`, checked before anything runs, and the value
    function's connection: the stub's for `--value stub` (only with --model stub, whose
    server it is), --value-api-base's, or None (LiteLLM's own)."""
    from turnbon_graph.bench.strategies.registry import value_scheme
    from turnbon_graph.cli.flags.values import STUB_MODEL
    from turnbon_graph.cli.models import STUB_ID, check_model_ids
    from turnbon_graph.errors import ConfigurationError

    value = args.value
    kwargs = {"api_base": args.value_api_base} if args.value_api_base else None
    if value == STUB_MODEL:
        if args.model != STUB_MODEL:
            raise ConfigurationError(
                "--value stub is the loopback stub of --model stub; with another model, "
                "name a value model id (default: the generator's model)"
            )
        if kwargs is not None:
            raise ConfigurationError("--value stub serves on loopback: drop --value-api-base")
        value, kwargs = STUB_ID, dict(link)
    scheme = value_scheme(value)
    model = value if scheme is None else scheme[1] if scheme[0] == "prm" else None
    if scheme is not None and scheme[0] == "prm" and not model:
        raise ConfigurationError("--value prm needs the reward model's id: --value prm:MODEL")
    if scheme is not None and scheme[0] == "oracle":
        print(
            "--value oracle: the task's own tests score every partial trajectory, so the "
            "search sees the verifier; its settings (value=oracle) are an upper bound for "
            "study, not a strategy's result",
            file=sys.stderr,
        )
    if model is not None and value != STUB_ID:
        check_model_ids(model)
        check_value_model(args, model)
    if args.budget_unit == "usd":
        check_priced(args.model, model)
    return value, kwargs


def check_value_model(args: argparse.Namespace, value: str) -> None:
    """Refuses, before anything runs, a value model LiteLLM cannot route or whose key is
    not set (as the generator's is checked): every value call would fail."""
    from turnbon_graph.cli.models import check_credentials
    from turnbon_graph.errors import ConfigurationError

    if getattr(args, "ray", None) not in (None, "local"):
        return  # a cluster's workers hold keys of their own
    try:
        check_credentials(value, {})
    except ConfigurationError as exc:
        raise ConfigurationError(f"--value {value}: {exc}") from None


def check_priced(model: str, value: str | None) -> None:
    """--budget-unit usd needs LiteLLM's price of every model a search calls."""
    from turnbon_graph._litellm.loading import quiet_litellm
    from turnbon_graph._litellm.model_map import is_priced
    from turnbon_graph.errors import ConfigurationError

    quiet_litellm()  # the price map, loaded
    unpriced = [m for m in dict.fromkeys([model, value or model]) if not is_priced(m)]
    if unpriced:
        raise ConfigurationError(
            f"--budget-unit usd: LiteLLM's price map has no price for {', '.join(unpriced)}; "
            "count tokens instead (--budget-unit tokens or completion), or register the "
            "model's price with litellm.register_model"
        )


def value_failures(results: list[Any], order: list[str], model: str) -> list[str]:
    """Says, per setting, how many value answers failed or were unusable and the first
    one's error (on stderr); returns the settings where every value asked for failed:
    the search ran blind, its results say nothing of the strategy."""
    blind = []
    for setting in order:
        rows = [r for r in results if r.setting == setting and r.search is not None]
        asked = sum(r.search.value_calls for r in rows)
        failed = sum(r.search.value_failed + r.search.value_unparsed for r in rows)
        if not failed:
            continue
        first = next(r.search.value_error for r in rows if r.search.value_error)
        named = next((r.strategy.value for r in rows if r.strategy and r.strategy.value), model)
        print(
            f"{setting}: {failed} of {asked} value answers of the value model {named} failed "
            f"or could not be read; the first: {first}",
            file=sys.stderr,
        )
        if failed == asked:
            blind.append(setting)
            print(
                f"{setting}: every value call failed, so its search ranked nothing: fix the "
                f"value model {named} (--value; its id, key or endpoint) and run again "
                "into a new run folder",
                file=sys.stderr,
            )
    return blind


def refuse_another_model(run_dir: Path, model: str) -> None:
    """Refuses, before anything is printed or started, a rerun into a run folder made
    with another model: its settings keep the model (`bench.runs.RunSettings`), so the
    run would be refused once set up, after saying it resumes. The other settings are
    checked there."""
    from turnbon_graph.bench.running.runs import SETTINGS_FILE, RunSettings
    from turnbon_graph.errors import ConfigurationError

    path = run_dir / SETTINGS_FILE
    try:
        made_with = RunSettings.model_validate_json(path.read_text(encoding="utf-8")).model
    except (OSError, ValueError):  # no run yet, or unreadable: the runner says which
        return
    if made_with != model:
        raise ConfigurationError(
            f"{run_dir} holds a run of the model {made_with}, not {model}: a run folder keeps "
            "the model it was made with (--redo-errors reruns its episodes with the same "
            "settings); start a new run folder (--run NEW, or no --run for a new one under "
            "runs/)"
        )


def refuse_other_settings(run_dir: Path, labels: list[str]) -> None:
    """Refuses, before it says it resumes, a rerun into a run folder of other settings
    (other strategies, budgets or N); the rest of its settings are checked when it is
    set up (`bench.running.plan`)."""
    from turnbon_graph.bench.running.runs import SETTINGS_FILE, RunSettings
    from turnbon_graph.errors import ConfigurationError

    try:
        previous = RunSettings.model_validate_json(
            (run_dir / SETTINGS_FILE).read_text(encoding="utf-8")
        )
    except (OSError, ValueError):  # no run yet, or unreadable: the runner says which
        return
    theirs = [s.label for s in previous.settings()]
    if theirs != labels:
        raise ConfigurationError(
            f"{run_dir} holds a run of the settings {', '.join(theirs)}, not "
            f"{', '.join(labels)}: use a new run folder (--run NEW), or the same "
            "--strategy, -n and --token-budget to resume it"
        )


def resuming(recorded: list[EpisodeResult], total: int, redo_errors: bool, run_dir: Path) -> str:
    """What a rerun into `run_dir` finds there and will run."""
    errors = sum(r.outcome == "agent_error" for r in recorded)
    redo = errors if redo_errors else 0
    left = max(total - len(recorded), 0) + redo
    line = f"Resuming: {len(recorded)} of {total} episode(s) in {run_dir}; "
    line += f"{left} to run" if left else "nothing to run"
    if redo:
        line += f", {redo} of them again (they ended in an agent error)"
    elif errors:
        line += f"; {errors} ended in an agent error (--redo-errors runs those again)"
    return line + "."


def agent_errors(results: list[Any], order: list[str], model: str | None = None) -> list[str]:
    """Says, per setting, how many episodes ended in an agent error and the first one's
    message (on stderr); returns the settings where every episode did (a broken model
    id, key or endpoint, or a task that cannot start: not a result), after saying what
    to do about them (`failures.advice`: --redo-errors only where a rerun with the same
    settings can succeed)."""
    from turnbon_graph.cli.failures import Failed, advice

    broken = []
    failed: list[Failed] = []
    for setting in order:
        rows = [r for r in results if r.setting == setting]
        errors = [r for r in rows if r.outcome == "agent_error"]
        if not errors:
            continue
        print(
            f"{setting}: {len(errors)} of {len(rows)} episodes ended in an agent error; "
            f"the first: {errors[0].error or 'no message'}",
            file=sys.stderr,
        )
        if len(errors) == len(rows):
            broken.append(setting)
            failed.extend(Failed(r.task, r.error, r.turns) for r in errors)
    if broken:
        print(advice(failed, ", ".join(broken), model, "--redo-errors"), file=sys.stderr)
    return broken
