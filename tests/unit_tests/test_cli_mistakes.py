"""Mistakes on the command line, refused before anything runs: a misspelled flag (by the
command it was given to, with its usage and the closest flag), a command missing its
--model, an unknown command or choice, a model id whose provider LiteLLM does not know,
a --selector that is neither a keyword nor a routable model id. Each exits 2 with what
was probably meant, no traceback, nothing printed on stdout, no run folder; LiteLLM is
not imported where no model id needs checking."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph import __version__
from turnbon_graph.cli import main
from turnbon_graph.cli.flags.values import SELECTOR_KEYWORDS, STUB_MODEL, model_name, selector_name
from turnbon_graph.cli.models import check_credentials, check_model_ids
from turnbon_graph.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What `turnbon ARGV` says when argparse refuses it: exit 2, only stderr."""
    with pytest.raises(SystemExit) as raised:
        main(argv)
    out, err = capsys.readouterr()
    assert raised.value.code == 2, err
    assert out == "" and "Traceback" not in err
    return err


def refused_before_running(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What `turnbon ARGV` says when a check refuses it: exit 2, nothing on stdout."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == "" and "Traceback" not in err  # no task shown, no "Run folder:"
    return err


def test_version_names_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--version"])
    assert raised.value.code == 0
    assert capsys.readouterr().out == f"turnbon {__version__}\n"


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["bench", "--model", "stub", "--trails", "2"], "--trials"),
        (["bench", "--model", "stub", "--trails=2"], "--trials"),
        (["demo", "--model", "stub", "--sede", "1"], "--seed"),
        (["run", "largest-file", "--model", "stub", "--tirals", "2"], "--trials"),
        (["report", "runs/x", "--resamles", "10"], "--resamples"),
        (["judge", "runs/x", "--model", "openai/j", "--rubirc", "a.yaml"], "--rubrics"),
        (["analyze", "runs/x", "--basline", "N=1"], "--baseline"),
        (["rollouts", "--model", "stub", "--rolouts", "2"], "--rollouts"),
        (["serve", "--model", "openai/x", "--prot", "9"], "--port"),
    ],
)
def test_a_misspelled_flag_is_reported_by_its_command_with_the_closest_flag(
    argv: list[str], meant: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    command = argv[0]
    err = refused(argv, capsys)
    assert err.startswith(f"usage: turnbon {command} ")  # the command's usage, not the top's
    assert f"turnbon {command}: error: unrecognized arguments: " in err
    assert f"did you mean {meant}?" in err
    assert not (tmp_path / "runs").exists() and not Path("runs/x").exists()


def test_several_misspelled_flags_each_get_their_guess(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["bench", "--model", "stub", "--trails", "2", "--sed", "3", "extra"], capsys)
    assert "unrecognized arguments: --trails 2 --sed 3 extra" in err
    assert "did you mean --trials (for --trails) or --seed (for --sed)?" in err


def test_a_flag_before_the_command_is_the_top_levels(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["--trails", "bench", "--model", "stub"], capsys)
    assert err.startswith("usage: turnbon [-h] [--version]")
    assert "turnbon: error: unrecognized arguments: --trails" in err


def test_a_bench_run_folder_is_not_written_for_a_misspelled_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    refused(["bench", "--model", "stub", "--run", str(run), "--trails", "2"], capsys)
    assert not run.exists()


@pytest.mark.parametrize("command", ["bench", "rollouts"])
def test_a_command_without_its_model_names_the_offline_one(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # bench asks for it itself (its --agent oracle takes none), rollouts through argparse
    check = refused_before_running if command == "bench" else refused
    err = check([command], capsys)
    assert f"turnbon {command}: error: the following arguments are required: --model" in err
    assert "--model stub to try it offline" in err and "openai/gpt-4o-mini" in err


def test_a_model_flag_without_its_value_names_the_offline_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused(["bench", "--model"], capsys)
    assert "argument --model: expected one argument" in err and "--model stub" in err


def test_an_unknown_command_or_choice_gets_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["bnech", "--model", "stub"], capsys)
    assert "invalid choice: 'bnech'" in err and "did you mean bench?" in err
    err = refused(["demo", "--tool-calling", "nativ"], capsys)
    assert err.startswith("usage: turnbon demo ") and "did you mean native?" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--selector", "majorty", "--model", "stub"],
        ["bench", "--selector", "majorty", "--model", "stub"],
        ["rollouts", "--selector", "Majority", "--model", "stub"],
        ["serve", "--selector", "majorty", "--model", "openai/x"],
    ],
)
def test_a_near_miss_of_a_selector_keyword_is_refused_while_parsing(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(argv, capsys)
    assert f"turnbon {argv[0]}: error: argument --selector: " in err
    assert "did you mean majority?" in err and "first, random, majority" in err


def test_a_selector_in_a_config_file_is_held_to_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text('task = "largest-file"\nmodel = "stub"\nselector = "frist"\n')
    err = refused_before_running(["run", "--config", str(config)], capsys)
    assert f"{config}: selector = 'frist': " in err and "did you mean first?" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--model", "stbu"],
        ["run", "largest-file", "--model", "stubb"],
        ["bench", "--model", "Stub"],
        ["rollouts", "--model", "sutb"],
        ["serve", "--model", "stbu"],
    ],
)
def test_a_near_miss_of_stub_is_refused_while_parsing(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(argv, capsys)
    assert f"turnbon {argv[0]}: error: argument --model: " in err
    assert "did you mean stub?" in err and "openai/gpt-4o-mini" in err


def test_a_model_in_a_config_file_is_held_to_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text('task = "largest-file"\nmodel = "stbu"\n')
    err = refused_before_running(["run", "--config", str(config)], capsys)
    assert f"{config}: model = 'stbu': " in err and "did you mean stub?" in err


@pytest.mark.parametrize(
    ("selector", "says"),
    [
        ("foo", "nor a model id LiteLLM can route (it has no provider prefix"),
        ("opnai/gpt-4o", "did you mean openai/gpt-4o?"),
    ],
)
def test_a_selector_that_is_no_keyword_and_no_routable_model_id_is_refused(
    selector: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused_before_running(["demo", "--model", "stub", "--selector", selector], capsys)
    assert f"turnbon demo: error: the selector {selector} is neither a selector that " in err
    assert "(first, random, majority)" in err and says in err


def test_a_demo_with_an_unknown_provider_prints_no_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused_before_running(["demo", "--model", "opnai/gpt-4o-mini"], capsys)
    assert "turnbon demo: error: the model opnai/gpt-4o-mini names 'opnai', a provider" in err
    assert "did you mean openai/gpt-4o-mini?" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--model", "opnai/gpt-4o-mini", "--n", "1"],
        ["rollouts", "--model", "opnai/gpt-4o-mini"],
        ["bench", "--model", "stub", "--selector", "opnai/gpt-4o-mini"],
    ],
)
def test_a_run_with_an_unknown_provider_writes_no_run_folder(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    err = refused_before_running([*argv, "--run", str(run)], capsys)
    assert "did you mean openai/gpt-4o-mini?" in err
    assert not run.exists()


def test_run_refuses_an_unknown_provider_before_the_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused_before_running(["run", "largest-file", "--model", "opnai/gpt-4o-mini"], capsys)
    assert "did you mean openai/gpt-4o-mini?" in err


def test_a_bare_model_name_litellm_does_not_know_gets_the_closest_it_knows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused_before_running(["demo", "--model", "gpt4o-mini"], capsys)
    assert "has no provider prefix, and LiteLLM knows no model of that name" in err
    assert "did you mean gpt-4o-mini?" in err


@pytest.mark.parametrize(
    ("model", "kwargs"),
    [
        ("openai/gpt-4o-mini", {}),
        ("gpt-4o-mini", {}),
        ("hosted_vllm/qwen", {"api_base": "http://127.0.0.1:8000/v1"}),
        ("ollama/llama3", {}),
        ("ollama_chat/llama3", {}),
        ("anthropic/claude-sonnet-4-5", {}),
        ("together_ai/meta-llama/Llama-3-8b", {}),
    ],
)
def test_model_ids_litellm_routes_pass(model: str, kwargs: dict[str, Any]) -> None:
    check_model_ids(model, model, api_base=kwargs.get("api_base"))
    check_model_ids(model, None, api_base=kwargs.get("api_base"))


def test_a_router_model_group_passes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    params = {"model": "openai/gpt-4o-mini", "api_key": "sk-k", "api_base": "http://127.0.0.1:9"}
    router = litellm.Router(model_list=[{"model_name": "my-group", "litellm_params": params}])
    check_credentials("my-group", {}, "my-group", {}, router=router)
    with pytest.raises(ConfigurationError, match="the model my-group has no provider prefix"):
        check_credentials("my-group", {})


def test_no_model_litellm_knows_is_taken_for_a_misspelled_keyword() -> None:
    """`selector_name` refuses near misses of the keywords without asking LiteLLM: no
    bare model name in LiteLLM's model list may be one."""
    import litellm

    bare = [name for name in litellm.model_cost if "/" not in name]
    assert len(bare) > 100
    assert [name for name in bare if selector_name(name) != name] == []
    assert [selector_name(k) for k in SELECTOR_KEYWORDS] == list(SELECTOR_KEYWORDS)
    assert [name for name in bare if model_name(name) != name] == []  # nor for `stub`
    assert model_name(STUB_MODEL) == STUB_MODEL


def _litellm_imported_after(argv: list[str]) -> bool:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from turnbon_graph.cli import main\n"
        f"try: main({argv!r})\n"
        "except SystemExit: pass\n"
        "print('litellm' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--model", "stub", "--trails", "2"],
        ["bench"],
        ["demo", "--selector", "majorty", "--model", "stub"],
        ["demo", "--model", "stbu"],
        ["--version"],
        ["demo", "--help"],
    ],
)
def test_a_mistake_that_needs_no_model_id_checked_does_not_import_litellm(
    argv: list[str],
) -> None:
    assert not _litellm_imported_after(argv)


def test_the_check_of_the_stub_and_of_selectors_that_call_no_model_imports_nothing() -> None:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from turnbon_graph.cli.models import check_model_ids, make_selector\n"
        "check_model_ids('stub', make_selector('majority'))\n"
        "check_model_ids(None, None)\n"
        "print('litellm' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("value", ["inf", "nan", "1e30", "0"])
def test_a_size_flag_takes_a_finite_size_within_its_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(["serve", "--model", "stub", "--response-store-mb", value], capsys)
    # one line: the flag, what is wrong with its value, where the flags are listed
    assert err.startswith("turnbon serve: error: argument --response-store-mb: ")
    assert err.endswith(" (see turnbon serve --help)\n") and err.count("\n") == 1


def test_a_wrong_choice_still_shows_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["serve", "--model", "stub", "--log-level", "loud"], capsys)
    assert err.startswith("usage: turnbon serve ") and "invalid choice: 'loud'" in err
