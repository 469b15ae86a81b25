"""What `turnbon bench` advises after a run whose every episode failed: --redo-errors only
where a rerun with the same settings can succeed. A wrong model id is one of the run's
settings (a new run folder, and a rerun into the old one naming another model is refused
before anything is printed); a task that cannot start is not the model's fault (what
failed is said, not "check the model id")."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnbon_graph.cli import main
from turnbon_graph.cli.failures import kind_of
from turnbon_graph.testing import StubServer, error

NO_SUCH_MODEL = "The model `gpt-4o-mni` does not exist or you do not have access to it."


def bench(stub: StubServer, model: str, run: Path, *extra: str) -> list[str]:
    return ["bench", "--model", model, "--api-base", stub.base_url, "--n", "1",
            "--task", "greet-script", "--selector", "first", "--run", str(run), *extra]  # fmt: skip


def test_a_wrong_model_id_is_advised_a_new_run_folder_not_redo_errors(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    stub.script(error(404, NO_SUCH_MODEL))
    run = tmp_path / "run"
    assert main(bench(stub, "openai/gpt-4o-mni", run)) == 1
    err = capsys.readouterr().err
    assert "N=1: 1 of 1 episodes ended in an agent error; the first: " in err
    assert "the model id openai/gpt-4o-mni names no model the provider serves" in err
    assert "a new run folder (--run NEW" in err
    assert "then run the same command with --redo-errors" not in err

    # Following the old advice with the model fixed: refused before anything is printed.
    code = main(bench(stub, "openai/gpt-4o-mini", run, "--redo-errors"))
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"{run} holds a run of the model openai/gpt-4o-mni, not openai/gpt-4o-mini" in err
    assert "start a new run folder (--run NEW" in err


def test_a_failed_endpoint_is_advised_redo_errors(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    stub.script(error(503, "overloaded"))
    assert main(bench(stub, "openai/gpt-4o-mini", tmp_path / "run", "--timeout", "5")) == 1
    err = capsys.readouterr().err
    assert "failed before a verdict in its model calls" in err
    assert "then run the same command with --redo-errors" in err


def test_a_task_that_cannot_start_is_named_not_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = tmp_path / "tasks" / "broken"
    for part in ("tests", "environment", "solution"):
        (task / part).mkdir(parents=True)
    (task / "instruction.md").write_text("Task broken.\n")
    (task / "task.toml").write_text('[metadata]\ndifficulty = "easy"\ncategory = "test"\n')
    (task / "tests" / "test_x.py").write_text("def test_x() -> None:\n    pass\n")
    (task / "environment" / "setup.sh").write_text("echo preparing\nexit 3\n")
    run = tmp_path / "run"
    argv = ["bench", "--tasks", str(tmp_path / "tasks"), "--model", "stub", "--n", "1"]
    assert main([*argv, "--run", str(run)]) == 1
    err = capsys.readouterr().err
    assert "Every episode of N=1 failed at its start, before a verdict and not in a model" in err
    assert "the model id, the api_base and the API key are not the cause" in err
    assert "SetupScriptError: setup.sh of task broken failed" in err
    assert "check the model id" not in err
    assert "then run the same command with --redo-errors." in err  # the same settings


@pytest.mark.parametrize(
    ("error_text", "kind"),
    [
        (
            "AllCandidatesFailedError: All 4 candidate call(s) to 'openai/x' failed; last "
            f"error: NotFoundError: litellm.NotFoundError: OpenAIException - {NO_SUCH_MODEL}. "
            "Check the model id, api_base and credentials, or raise `timeout`",
            "model",
        ),
        (
            "AllCandidatesFailedError: All 1 candidate call(s) to 'hosted_vllm/q' failed; last "
            "error: NotFoundError: Hosted_vllmException - model 'q' not found, try pulling it",
            "model",
        ),
        (
            "AllCandidatesFailedError: All 1 candidate call(s) to 'openai/x' failed; last "
            "error: NotFoundError: OpenAIException - stub server: no endpoint POST /v1/nope. "
            "Check the model id, api_base and credentials",
            "call",
        ),
        (
            "AllCandidatesFailedError: All 1 candidate call(s) to 'openai/x' failed; last "
            "error: InternalServerError: Cannot connect to host 127.0.0.1:9. Check the model id",
            "call",
        ),
        ("CallFailedError: AuthenticationError: key [REDACTED]", "call"),
        ("ConfigurationError: the model openai/x needs OPENAI_API_KEY, which is not set", "call"),
        ("SetupScriptError: setup.sh of task t failed, so the episode cannot start", "other"),
        ("verifier: pytest could not run", "other"),
        (None, "other"),
    ],
)
def test_what_an_agent_error_says_failed(error_text: str | None, kind: str) -> None:
    assert kind_of(error_text) == kind
