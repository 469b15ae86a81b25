"""The `turnbon` command's parts: arguments, selector names, environment discovery, run
folders and resume hints, and that `--help` and `report` never import LiteLLM/LangGraph."""

from __future__ import annotations

import os
import subprocess
import sys
from argparse import Namespace
from datetime import datetime
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from tests.cli_envs import StubbedCounter
from tests.helpers import candidate
from turnbon_graph.bench.environment import Environment
from turnbon_graph.bench.registry import ENVIRONMENTS_GROUP, load_environment
from turnbon_graph.bench.running.runs import EpisodeResult, RunSettings
from turnbon_graph.cli import main
from turnbon_graph.cli.flags.run_folder import default_run_dir, resume_command
from turnbon_graph.cli.main import build_parser
from turnbon_graph.cli.models import (
    check_credentials,
    check_run_credentials,
    engine_options,
    make_selector,
)
from turnbon_graph.cli.rollouts import rollout_budget
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors import FirstSelector, MajorityVoteSelector, RandomSelector

ROOT = Path(__file__).resolve().parents[2]


def entry(name: str, target: str) -> EntryPoint:
    return EntryPoint(name=name, value=f"tests.cli_envs:{target}", group=ENVIRONMENTS_GROUP)


def test_bench_arguments_parse_into_settings() -> None:
    command = (
        "bench --env counter --tasks a=3 --model openai/x --n 1 4 8 --selector majority "
        "--trials 4 --concurrency 2 --task a --task b c --run out --api-base http://h/v1 "
        "--timeout 30 --seed 7"
    )
    args = build_parser().parse_args(command.split())
    assert args.env == "counter" and args.tasks == "a=3" and args.model == "openai/x"
    assert args.n == [1, 4, 8] and args.trials == 4 and args.concurrency == 2
    assert args.task == ["a", "b", "c"] and args.run == Path("out")
    assert args.api_base == "http://h/v1" and args.timeout == 30.0 and args.seed == 7
    defaults = build_parser().parse_args(["bench", "--env", "e", "--model", "m"])
    assert defaults.n == [1, 4] and defaults.trials == 1 and defaults.selector is None
    assert defaults.task is None and defaults.run is None


@pytest.mark.parametrize("bad", [["--n", "0"], ["--trials", "x"], ["--concurrency", "-1"]])
def test_bench_refuses_counts_below_one(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--env", "e", "--model", "m", *bad])
    assert "turnbon bench: error: argument" in capsys.readouterr().err


def test_bench_needs_a_model_and_runs_the_terminal_environment_by_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--env", "e"]) == 2  # before the environment is looked up
    assert "required: --model" in capsys.readouterr().err
    assert build_parser().parse_args(["bench", "--model", "m"]).env == "terminal"


async def test_selector_names_map_to_selectors_and_anything_else_is_a_model_id() -> None:
    assert isinstance(make_selector("first"), FirstSelector)
    assert isinstance(make_selector("majority"), MajorityVoteSelector)
    random = make_selector("random", seed=3)
    assert isinstance(random, RandomSelector)
    candidates = [candidate(i, f"cmd {i}") for i in range(8)]
    reference = RandomSelector(3)
    for _ in range(5):  # the seed reaches it: the same picks as a selector seeded alike
        picked = await random.select([], candidates)
        assert picked.index == (await reference.select([], candidates)).index
    assert make_selector("openai/gpt-4o") == "openai/gpt-4o"  # an LLMSelector, by the engine
    assert make_selector(None) is None


def test_an_unknown_environment_lists_the_available_ones() -> None:
    with pytest.raises(ConfigurationError, match="available: none installed") as none:
        load_environment("terminal", None, [])
    assert ENVIRONMENTS_GROUP in str(none.value)
    available = [entry("counter", "counter"), entry("bfcl", "counter_without_stub")]
    with pytest.raises(ConfigurationError, match=r"'terminal' \(available: bfcl, counter\)"):
        load_environment("terminal", None, available)


def test_an_environment_is_built_by_its_entry_point_from_the_spec() -> None:
    environment = load_environment("counter", "a=3,b=5", [entry("counter", "counter")])
    assert isinstance(environment, StubbedCounter) and isinstance(environment, Environment)
    assert [t.id for t in environment.tasks()] == ["a", "b"]
    assert environment.targets == {"a": 3, "b": 5}


def test_a_broken_entry_point_or_factory_is_named() -> None:
    missing = EntryPoint(name="gone", value="tests.no_such_module:f", group=ENVIRONMENTS_GROUP)
    with pytest.raises(ConfigurationError, match=r"'gone' .*failed to load.*ModuleNotFound"):
        load_environment("gone", None, [missing])
    with pytest.raises(ConfigurationError, match=r"returned object.*must return an Environment"):
        load_environment("odd", None, [entry("odd", "not_an_environment")])


def test_main_reports_an_unknown_environment_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--env", "no-such-env", "--model", "openai/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("turnbon bench: error: unknown environment 'no-such-env' (available:")


@pytest.mark.parametrize("command", ["bench", "rollouts"])
def test_a_cluster_limit_without_ray_is_refused(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--env", "terminal", "--model", "stub", "--run", str(tmp_path / "r")]
    assert main([*argv, "--cluster-rate-limit", "5"]) == 2
    assert "--cluster-rate-limit limits calls across Ray workers: add --ray" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "r").exists()


def test_the_cluster_limit_flags_reach_the_ray_options() -> None:
    import argparse

    from turnbon_graph.bench.running.ray_runner import RayOptions, on_ray_as_asked

    args = argparse.Namespace(
        env="counter", tasks=None, model="stub", ray="auto",
        cluster_max_concurrency=8, cluster_rate_limit=2.5,
    )  # fmt: skip
    _, options = on_ray_as_asked(args, StubbedCounter({"t": 1}))
    assert options == RayOptions(
        address="auto", worker_stub=True, max_concurrency=8, rate_limit=2.5
    )


def test_the_default_run_folder_names_environment_model_and_time() -> None:
    now = datetime(2025, 3, 4, 5, 6, 7)
    assert default_run_dir("counter", "openai/gpt-4o-mini", now) == Path(
        "runs/counter-openai-gpt-4o-mini-20250304-050607"
    )
    assert default_run_dir("tb", "stub", now).name == "tb-stub-20250304-050607"


def test_the_resume_command_is_the_same_command_with_the_run_folder() -> None:
    argv = ["bench", "--env", "e", "--tasks", "a b", "--model", "stub", "--n", "1", "4"]
    assert resume_command(argv, Path("runs/x")) == (
        "turnbon bench --env e --tasks 'a b' --model stub --n 1 4 --run runs/x"
    )
    assert resume_command([*argv, "--run", "old"], Path("runs/x")).endswith("--n 1 4 --run runs/x")
    assert resume_command(["bench", "--run=old", "--env", "e"], Path("r")) == (
        "turnbon bench --env e --run r"
    )


def test_report_on_a_missing_folder_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "is not a run folder" in capsys.readouterr().err


def _tiny_run(run: Path) -> None:
    run.mkdir()
    settings = RunSettings(
        environment="e", model="m", selector="first", n_values=[1], trials=1, tasks=["a"]
    )
    (run / "run.json").write_text(settings.model_dump_json())
    episode = EpisodeResult(
        task="a", trial=0, setting="N=1", n=1, outcome="pass", turns=3, duration_s=1.0
    )
    (run / "episodes.jsonl").write_text(episode.model_dump_json() + "\n")


def _modules_after(code: str) -> str:
    probe = f"{code}; print(sorted(m for m in ('litellm', 'langgraph') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); {probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def test_help_and_report_import_neither_litellm_nor_langgraph(tmp_path: Path) -> None:
    helps = (
        ["--help"],
        *([c, "--help"] for c in ("bench", "report", "judge", "analyze", "rollouts")),
    )
    for command in helps:
        code = (
            f"from turnbon_graph.cli import main\ntry: main({command!r})\nexcept SystemExit: pass"
        )
        assert _modules_after(f"exec({code!r})") == "[]", command
    run = tmp_path / "run"
    _tiny_run(run)
    code = f"from turnbon_graph.cli import main; main(['report', {str(run)!r}])"
    assert _modules_after(code) == "[]"
    assert (run / "report" / "report.md").exists()


def test_report_prints_the_path_of_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _tiny_run(run)
    assert main(["report", str(run), "--out", str(tmp_path / "out"), "--resamples", "10"]) == 0
    path = tmp_path / "out" / "report.md"
    html = path.parent / "report.html"
    assert capsys.readouterr().out.split() == [str(path), str(html)]
    assert html.is_file()
    assert "| N=1 | 1 | 1 | 100.0% |" in path.read_text()


def test_help_lists_bench_and_report(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "bench" in out and "report" in out and "demo" in out
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    assert "--selector MODEL|first|random|majority" in out and "turnbon.environments" in out


def test_a_selector_model_gets_its_own_endpoint_except_on_the_stub() -> None:
    def options(*extra: str) -> dict[str, Any]:
        args = build_parser().parse_args(["bench", "--env", "e", *extra])
        return engine_options(args, make_selector(args.selector), {"api_base": "http://g"})

    judged = options("--model", "openai/g", "--selector", "openai/j", "--timeout", "9")
    assert judged["completion_kwargs"] == {"api_base": "http://g"}
    assert "selector_kwargs" not in judged and judged["timeout"] == 9.0
    routed = options("--model", "openai/g", "--selector", "openai/j", "--selector-api-base", "x")
    assert routed["selector_kwargs"] == {"api_base": "x"}
    stub = options("--model", "stub", "--selector", "openai/j", "--seed", "4")
    assert stub["selector_kwargs"] == {"api_base": "http://g"} and stub["seed"] == 4
    assert "selector_kwargs" not in options("--model", "stub", "--selector", "first")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "openai/g", "--selector-api-base", "x"], "--selector-api-base applies only"),
        (["--model", "stub", "--api-base", "http://h"], "--api-base has no effect"),
    ],
)
def test_options_that_would_be_ignored_are_refused(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--env", "e", *extra]) == 2
    assert message in capsys.readouterr().err


def test_rollout_flags_build_the_budget() -> None:
    def budget(*extra: str) -> Any:
        return rollout_budget(
            build_parser().parse_args(["rollouts", "--env", "e", "--model", "m", *extra])
        )

    plain = budget()
    assert plain.turns is None and plain.sample_turns is None and plain.rollouts == 1
    assert plain.max_rollouts is None and plain.max_tokens is None and plain.seed == 0
    chosen = budget(
        "--turns", "3", "1", "3", "--rollouts", "2", "--max-rollouts", "40", "--seed", "5"
    )
    assert chosen.turns == [1, 3] and chosen.rollouts == 2 and chosen.max_rollouts == 40
    assert chosen.seed == 5
    sampled = budget("--sample-turns", "2", "--horizon", "6", "--max-tokens", "90000")
    assert (sampled.sample_turns, sampled.horizon, sampled.max_tokens) == (2, 6, 90000)
    with pytest.raises(ConfigurationError, match="--horizon goes with --sample-turns"):
        budget("--horizon", "6")


@pytest.mark.parametrize(
    "bad", [["--turns", "1", "--sample-turns", "2"], ["--rollouts", "0"], ["--turns", "x"]]
)
def test_rollouts_refuses_bad_flags_while_parsing(
    bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args(["rollouts", "--env", "e", "--model", "m", *bad])
    assert raised.value.code == 2
    assert "turnbon rollouts: error: argument" in capsys.readouterr().err


def test_judge_and_analyze_arguments_parse() -> None:
    command = (
        "judge runs/x --model openai/j --rubrics a.yaml b.yaml --settings N=1 N=4 "
        "--api-base http://h/v1 --concurrency 3 --retry-unknown"
    )
    judge = build_parser().parse_args(command.split())
    assert judge.run == Path("runs/x") and judge.model == "openai/j"
    assert judge.rubrics == [Path("a.yaml"), Path("b.yaml")] and judge.settings == ["N=1", "N=4"]
    assert judge.api_base == "http://h/v1" and judge.concurrency == 3 and judge.retry_unknown
    defaults = build_parser().parse_args(["judge", "r", "--model", "m"])
    assert defaults.rubrics is None and defaults.settings is None and defaults.concurrency == 4
    assert defaults.baseline == "N=1" and not defaults.retry_unknown
    analyze = build_parser().parse_args(["analyze", "r"])
    assert (analyze.baseline, analyze.resamples, analyze.seed, analyze.out) == (
        "N=1",
        10_000,
        0,
        None,
    )


def test_judge_refuses_the_stub_model_and_names_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judge", str(tmp_path), "--model", "stub"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("turnbon judge: error: --model stub cannot judge")
    assert "--api-base" in err and "LiteLLM model id" in err


NO_KEY = "needs OPENAI_API_KEY, which is not set: export it"


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "--env", "terminal", "--task", "greet-script", "--n", "1"],
        ["rollouts", "--env", "terminal", "--task", "greet-script"],
        ["run", "greet-script"],
    ],
)
def test_a_run_without_its_providers_key_is_refused_before_it_starts(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Otherwise every call fails after its retries, and a bench run records each episode
    # as an agent error, which the rerun with the key then resumes past.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = tmp_path / "run"
    folder = [] if command[0] == "run" else ["--run", str(run)]
    assert main([*command, "--model", "openai/gpt-4o-mini", *folder]) == 2
    err = capsys.readouterr().err
    assert f"the model openai/gpt-4o-mini {NO_KEY}" in err and "Traceback" not in err
    assert not run.exists() or not any(run.glob("*.jsonl"))


def test_serve_without_the_upstream_key_exits_before_it_listens(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    command = [sys.executable, "-m", "turnbon_graph.cli", "serve", "--model", "openai/gpt-4o"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert f"the model openai/gpt-4o {NO_KEY}" in done.stderr


def test_an_llm_selector_without_its_key_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    command = ["bench", "--env", "terminal", "--task", "greet-script", "--n", "1", "--model",
               "openai/gpt-4o-mini", "--selector", "anthropic/claude-sonnet-4-5", "--run",
               str(tmp_path / "run")]  # fmt: skip
    assert main(command) == 2
    assert (
        "the selector anthropic/claude-sonnet-4-5 needs ANTHROPIC_API_KEY, which is not set"
        in capsys.readouterr().err
    )


def test_keys_given_or_credentials_found_elsewhere_pass_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    check_credentials("openai/gpt-4o-mini", {"api_key": "sk-given"})
    check_credentials("hosted_vllm/qwen", {"api_base": "http://127.0.0.1:8000/v1"})
    # AWS credentials may come from ~/.aws or an instance role: LiteLLM cannot tell.
    check_credentials("bedrock/anthropic.claude-3-haiku-20240307-v1:0", {})
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        check_credentials("openai/gpt-4o-mini", {"api_base": "http://127.0.0.1:8000/v1"})
    # A Ray cluster's workers hold their own keys; this machine's Ray is this machine.
    options: dict[str, Any] = {"completion_kwargs": {}}
    check_run_credentials(Namespace(ray="auto"), "openai/gpt-4o-mini", None, options)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        check_run_credentials(Namespace(ray="local"), "openai/gpt-4o-mini", None, options)
