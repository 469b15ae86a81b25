"""One flag vocabulary: every subcommand's parser, walked. A flag two commands share has
the same option strings, type and default in both (the few that mean something else
in one command are listed with the reason), every flag has help text, and every default
shows in `--help`."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from turnbon_graph.cli.flags.parser import shown_default
from turnbon_graph.cli.flags.shared import SHARED
from turnbon_graph.cli.main import build_parser
from turnbon_graph.cli.run import RUN_DEFAULTS

DIFFERENT_MEANING = {
    ("n", "bench"): "bench compares settings: several N, one run each (default 1 4)",
    ("task", "bench"): "bench and rollouts: run only these task ids (a list)",
    ("task", "rollouts"): "bench and rollouts: run only these task ids (a list)",
    ("max_turns", "demo"): "the demo stops after 4 turns so that it stays short",
}
"""(dest, command) pairs whose flag is not the shared one, and why."""


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]


def signature(action: argparse.Action) -> tuple[Any, ...]:
    return (tuple(action.option_strings), action.type, shown_default(action.default))


def test_every_command_is_walked() -> None:
    assert {"run", "demo", "bench", "report", "judge", "analyze", "rollouts"} <= set(subcommands())


def test_a_flag_shared_by_commands_has_one_name_type_and_default() -> None:
    seen: dict[str, dict[str, tuple[Any, ...]]] = {}
    for name, parser in subcommands().items():
        for action in flags(parser):
            if (action.dest, name) in DIFFERENT_MEANING:
                continue
            for option in action.option_strings:
                seen.setdefault(option, {})[name] = signature(action)
    shared = {option: by for option, by in seen.items() if len(by) > 1}
    assert {"--model", "--n", "--seed", "--trials", "--concurrency", "--env"} <= set(shared)
    for option, by_command in shared.items():
        assert len(set(by_command.values())) == 1, (option, by_command)


def test_shared_flags_are_the_ones_defined_in_arguments() -> None:
    for name, parser in subcommands().items():
        for action in flags(parser):
            flag = SHARED.get(action.dest)
            if flag is None or (action.dest, name) in DIFFERENT_MEANING:
                continue
            assert tuple(action.option_strings) == flag.names, (name, action.dest)
            assert action.type is flag.options.get("type"), (name, action.dest)
            assert action.default == flag.options.get("default"), (name, action.dest)


def test_the_common_flags_mean_the_same_everywhere() -> None:
    commands = subcommands()
    for name in ("run", "demo", "bench", "rollouts"):
        actions = {a.dest: a for a in flags(commands[name])}
        for dest in ("model", "n", "selector", "api_base", "temperature", "tool_calling", "seed"):
            assert dest in actions, (name, dest)
        assert actions["n"].option_strings == ["-n", "--n"]
    for name in ("run", "bench", "rollouts"):
        env = next(a for a in flags(commands[name]) if a.dest == "env")
        assert env.default == "terminal" and not env.required


def test_every_flag_has_help_and_every_default_shows_in_help() -> None:
    for name, parser in subcommands().items():
        for action in flags(parser):
            assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)
            if action.default in (None, False):
                continue
            formatter = parser._get_formatter()
            formatter.add_argument(action)
            text = " ".join(formatter.format_help().split())
            assert f"(default: {shown_default(action.default)})" in text, (name, text)


def test_run_shows_the_defaults_it_applies() -> None:
    run = subcommands()["run"]
    for action in flags(run):
        if action.dest in RUN_DEFAULTS:
            assert action.default == RUN_DEFAULTS[action.dest], action.dest


@pytest.mark.parametrize("command", ["run", "demo"])
def test_run_and_demo_document_their_exit_codes(command: str) -> None:
    text = " ".join(subcommands()[command].format_help().split())
    assert "exit codes: 0 every" in text and "; 2 bad input" in text


def test_demo_refuses_zero_candidates_while_parsing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args(["demo", "-n", "0"])
    assert raised.value.code == 2
    assert "argument -n/--n: 0 is less than 1" in capsys.readouterr().err


def test_the_serve_docs_show_every_server_flag_as_declared() -> None:
    # docs/serve.md's table is the options table itself: a flag added, renamed or given
    # another default there and not here (or the reverse) fails
    from pathlib import Path

    from turnbon_graph.cli.serve.options import SERVER_FLAGS, flags_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text()
    assert flags_table() in page
    assert all(f"`{flag.names[0]}`" in flags_table() for flag in SERVER_FLAGS.values())


def test_the_serve_parser_takes_every_declared_flag_under_its_setting() -> None:
    import argparse

    from turnbon_graph.cli.serve import SETTINGS, serve_arguments
    from turnbon_graph.cli.serve.options import SERVER_FLAGS

    parser = argparse.ArgumentParser()
    serve_arguments(parser)
    defaults = vars(parser.parse_args([]))
    assert {k: defaults[k] for k in SETTINGS} == SETTINGS
    assert set(SERVER_FLAGS) <= set(SETTINGS)
